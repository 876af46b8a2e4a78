// slicing/any.hpp: runtime slicing from a string
#include <catch2/catch.hpp>

#include <gradsync/slicing/any.hpp>

using namespace gradsync;

TEST_CASE("AnySlicing parses names and sizes and rejects bad strings") {
  REQUIRE(std::get<slicing::FixedSlices>(slicing::AnySlicing::parse("fixed:40000").policy).max_elements == 40'000);
  REQUIRE(std::get<slicing::Fusion>(slicing::AnySlicing::parse("fusion:1MiB").policy).threshold_bytes == (1u << 20));
  REQUIRE(std::get<slicing::Fusion>(slicing::AnySlicing::parse("fusion:64k").policy).threshold_bytes == 64'000);
  REQUIRE(slicing::AnySlicing::parse("slicefuse:5000").describe() == "slicefuse:5000");
  for (const char* bad : {"", "fixed:", "fixed:abc", "fixed:0", "fixed:-3", "fixed:10x", "whole:3", "slices", "FIXED"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(slicing::AnySlicing::parse(bad), ConfigError);
  }
  REQUIRE_THROWS_WITH(slicing::AnySlicing::parse("fixd:10"), Catch::Contains("'fixd:10'") && Catch::Contains("valid: whole"));
}
