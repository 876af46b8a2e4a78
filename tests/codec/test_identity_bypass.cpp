// Identity and the small-unit bypass are bit-exact, NaN payloads and signed zeros included.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include <gradsync/codec/any.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;

namespace {
std::vector<float> awkward_values(std::size_t n) {
  auto v = test_util::gaussian(n, 7, 1e3f);
  v[0] = -0.0f;
  v[1] = std::numeric_limits<float>::infinity();
  v[2] = std::numeric_limits<float>::denorm_min();
  v[3] = std::bit_cast<float>(0x7fc01234u);  // NaN with a payload
  v[4] = std::numeric_limits<float>::max();
  return v;
}
bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}
}  // namespace

TEST_CASE("identity round trip is bit-exact", "[codec][identity]") {
  const auto v = awkward_values(1000);
  const Identity c;
  const auto wire = test_util::encode(c, v);
  CHECK(wire.size() == header_bytes + 4000);
  CHECK(same_bits(test_util::decode(c, wire, v.size()), v));
}

TEST_CASE("units below bypass_below travel as exact fp32 under the fp32 id", "[codec][bypass]") {
  const auto v = awkward_values(default_bypass_below - 1);
  for (const char* spec : {"fp16:bypass=16384", "bf16:bypass=16384", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "onebit", "topk",
                           "ef+qsgd2"}) {
    INFO(spec);
    const AnyCodec c = AnyCodec::parse(spec);
    const auto wire = test_util::encode(c, v, {.seed = 3});
    REQUIRE(wire.size() == Identity{}.encoded_bytes(v.size()));
    CHECK(static_cast<int>(wire[3]) == Identity::id);
    CHECK(same_bits(test_util::decode(c, wire, v.size()), v));
    CHECK(same_bits(test_util::decode(Identity{}, wire, v.size()), v));
  }
}

TEST_CASE("a bypassed unit with error feedback sends gradient + residual and clears the residual", "[codec][bypass]") {
  const auto g = test_util::gaussian(500, 1);
  auto e = test_util::gaussian(500, 2, 0.1f);
  std::vector<float> expected(500);
  for (std::size_t i = 0; i < 500; ++i) expected[i] = g[i] + e[i];
  const OneBit c;  // bypass_below = 16384 > 500
  const auto wire = test_util::encode(c, g, {.residual = e});
  CHECK(same_bits(test_util::decode(c, wire, 500), expected));
  CHECK(std::all_of(e.begin(), e.end(), [](float x) { return x == 0.0f; }));
}

TEST_CASE("the bypass threshold keeps >= 99% of ResNet-50's parameters compressed", "[codec][bypass]") {
  // torchvision ResNet-50: conv1, 16 bottlenecks (4 with a projection), fc; BN has 2 tensors.
  std::vector<std::size_t> sizes{64 * 3 * 7 * 7, 64, 64};
  std::size_t in = 64;
  for (auto [planes, blocks] : {std::pair<std::size_t, int>{64, 3}, {128, 4}, {256, 6}, {512, 3}})
    for (int b = 0; b < blocks; ++b) {
      for (std::size_t w : {in * planes, planes * planes * 9, planes * planes * 4}) sizes.push_back(w);
      for (std::size_t bn : {planes, planes, planes, planes, 4 * planes, 4 * planes}) sizes.push_back(bn);
      if (b == 0) sizes.insert(sizes.end(), {in * planes * 4, 4 * planes, 4 * planes});
      in = 4 * planes;
    }
  sizes.insert(sizes.end(), {2048 * 1000, 1000});
  std::size_t total = 0, compressed = 0;
  for (std::size_t s : sizes) {
    total += s;
    if (s >= default_bypass_below) compressed += s;
  }
  CHECK(sizes.size() == 161);
  CHECK(total == 25'557'032);
  CHECK(double(compressed) / double(total) >= 0.99);
  CHECK(compressed == 25'557'032 - 67'624);
}
