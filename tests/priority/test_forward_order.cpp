// priority/forward_order.hpp (P3: the first layer of the forward pass goes first)
#include <catch2/catch.hpp>

#include <gradsync/priority/forward_order.hpp>
#include <gradsync/slicing/fixed_slices.hpp>
#include <gradsync/slicing/fusion.hpp>

using namespace gradsync;

TEST_CASE("ForwardOrder: the first layer of the forward pass is the most urgent") {
  const ModelLayout layout{{"a", 10}, {"b", 20}, {"c", 30}};
  const priority::ForwardOrder p;
  REQUIRE(p.levels(layout) == 3);
  const auto units = slicing::FixedSlices{.max_elements = 8}.plan(layout);
  for (const Unit& u : units) REQUIRE(p.key(u) == u.segments[0].layer);
  // a fused unit inherits its earliest layer
  const auto fused = slicing::Fusion{.threshold_bytes = 1000}.plan(layout);
  REQUIRE(fused.size() == 1);
  REQUIRE(p.key(fused[0]) == 0);
}
