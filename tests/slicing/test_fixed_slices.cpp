// slicing/fixed_slices.hpp
#include <catch2/catch.hpp>

#include <gradsync/slicing/fixed_slices.hpp>

using namespace gradsync;

TEST_CASE("FixedSlices cuts at max_elements, the P3 default is 40000") {
  REQUIRE(slicing::FixedSlices{}.max_elements == 40'000);
  const auto units = slicing::FixedSlices{.max_elements = 4000}.plan(ModelLayout{{"big", 9000}, {"one", 1}});
  REQUIRE(units.size() == 4);
  REQUIRE(units[0].elements == 4000);
  REQUIRE(units[1].elements == 4000);
  REQUIRE(units[2].elements == 1000);
  REQUIRE(units[2].segments[0].offset == 8000);
  REQUIRE(units[3].elements == 1);
}
