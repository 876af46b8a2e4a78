// Identity is bit-exact, NaN payloads and signed zeros included; first_non_finite (the NaN check
// before a unit is sent) finds exactly the first non-finite value.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <limits>

#include <gradsync/codec/any.hpp>
#include <gradsync/codec/memory.hpp>
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

TEST_CASE("first_non_finite finds the first NaN or Inf at any position of any length, and no finite value",
          "[codec][finite]") {
  using L = std::numeric_limits<float>;
  for (std::size_t n : {1u, 7u, 16u, 17u, 63u, 64u, 65u, 1000u}) {
    // Every finite extreme: the largest magnitudes, denormals, signed zeros.
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float extremes[] = {L::max(), -L::max(), L::denorm_min(), -0.0f, 1.0f, -L::min()};
      v[i] = extremes[i % 6];
    }
    REQUIRE_FALSE(first_non_finite(Identity{}, v).has_value());
    for (std::size_t at : {std::size_t(0), n / 2, n - 1})
      for (float bad : {L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(), std::bit_cast<float>(0x7f800001u)}) {
        std::vector<float> w = v;
        w[at] = bad;
        if (at + 1 < n) w[n - 1] = L::infinity();  // a later one must not be reported first
        CAPTURE(n, at, bad);
        const auto found = first_non_finite(Identity{}, w);
        REQUIRE(found.has_value());
        REQUIRE(found->index == at);
        REQUIRE(std::bit_cast<std::uint32_t>(found->value) == std::bit_cast<std::uint32_t>(bad));
      }
  }
}
