// Identity is bit-exact, NaN payloads and signed zeros included.
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
