// decode_add(wire, acc) gives bit for bit what decode followed by an element-wise add gives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "codec_cases.hpp"
#include "test_util.hpp"

TEST_CASE("decode_add == decode + add for every codec and unit size", "[codec]") {
  for (std::string_view spec : codec_cases::specs) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{777}, std::size_t{20'000}}) {  // 0: found by the fuzzer
      INFO(spec << " with " << n << " elements");
      const auto c = codec_cases::make(spec);
      const auto v = test_util::gaussian(n, 31);
      const auto wire = test_util::encode(c, v, {.seed = 2});
      auto acc = test_util::gaussian(n, 32);
      auto expected = acc;
      const auto d = test_util::decode(c, wire, n);
      for (std::size_t i = 0; i < n; ++i) expected[i] += d[i];
      c.decode_add(wire, acc);
      CHECK(std::equal(acc.begin(), acc.end(), expected.begin(), [](float a, float b) {
        return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
      }));
    }
  }
}
