// slicing/fusion.hpp: Fusion and SliceAndFuse
#include <catch2/catch.hpp>

#include <gradsync/slicing/fusion.hpp>

using namespace gradsync;

TEST_CASE("Fusion packs consecutive small layers, last layer first, up to the threshold") {
  const ModelLayout layout{{"a", 100}, {"b", 100}, {"c", 100}, {"big", 1000}, {"d", 50}};
  const auto units = slicing::Fusion{.threshold_bytes = 250 * sizeof(float)}.plan(layout);
  // backward order: d(50) alone since big(1000) does not fit; big alone; c+b (200); a
  REQUIRE(units.size() == 4);
  REQUIRE(units[0].segments.size() == 1);
  REQUIRE(units[0].segments[0].layer == 4);
  REQUIRE(units[1].elements == 1000);
  REQUIRE(units[2].fused());
  REQUIRE(units[2].elements == 200);
  REQUIRE(units[2].first_layer() == 1);
  REQUIRE(units[3].elements == 100);
}

TEST_CASE("SliceAndFuse slices large layers and fuses runs of small ones") {
  const ModelLayout layout{{"a", 10}, {"b", 20}, {"big", 250}, {"c", 30}, {"d", 40}};
  const auto units = slicing::SliceAndFuse{.slice_elements = 100}.plan(layout);
  // backward: d+c (70) fused; big sliced 100/100/50; b+a (30) fused
  REQUIRE(units.size() == 5);
  REQUIRE(units[0].fused());
  REQUIRE(units[0].elements == 70);
  REQUIRE(units[1].elements == 100);
  REQUIRE(units[3].elements == 50);
  REQUIRE(units[4].fused());
  REQUIRE(units[4].first_layer() == 0);
}
