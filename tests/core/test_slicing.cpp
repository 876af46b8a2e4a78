#include <catch2/catch.hpp>

#include <gradsync/slicing/any.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

namespace {
// Every element of every layer is covered exactly once.
void require_exact_cover(const ModelLayout& layout, const std::vector<Unit>& units) {
  std::vector<std::vector<int>> hits(layout.num_layers());
  for (std::size_t l = 0; l < layout.num_layers(); ++l) hits[l].assign(layout.layer(l).elements, 0);
  for (const Unit& u : units) {
    std::size_t sum = 0;
    for (const Segment& s : u.segments) {
      REQUIRE(s.offset + s.length <= layout.layer(s.layer).elements);
      for (std::size_t i = 0; i < s.length; ++i) ++hits[s.layer][s.offset + i];
      sum += s.length;
    }
    REQUIRE(sum == u.elements);
  }
  for (const auto& h : hits)
    for (int c : h) REQUIRE(c == 1);
}
}  // namespace

TEST_CASE("every slicing covers every element exactly once") {
  const auto layout = testing::uneven_layout();
  for (const char* s : {"whole", "fixed", "fixed:1000", "fixed:1", "fusion", "fusion:4KiB", "slicefuse:3000"}) {
    INFO(s);
    require_exact_cover(layout, slicing::AnySlicing::parse(s).plan(layout));
  }
}

TEST_CASE("WholeLayer gives one unit per layer") {
  const auto layout = testing::uneven_layout();
  const auto units = slicing::WholeLayer{}.plan(layout);
  REQUIRE(units.size() == layout.num_layers());
  for (const auto& u : units) REQUIRE_FALSE(u.fused());
}

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
