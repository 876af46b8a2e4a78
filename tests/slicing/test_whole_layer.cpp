// slicing/whole_layer.hpp
#include <catch2/catch.hpp>

#include <gradsync/slicing/whole_layer.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

TEST_CASE("WholeLayer gives one unit per layer") {
  const auto layout = testing::uneven_layout();
  const auto units = slicing::WholeLayer{}.plan(layout);
  REQUIRE(units.size() == layout.num_layers());
  for (const auto& u : units) REQUIRE_FALSE(u.fused());
}
