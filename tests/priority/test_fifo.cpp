// priority/fifo.hpp (wait-free backpropagation: one lane)
#include <catch2/catch.hpp>

#include <gradsync/priority/fifo.hpp>
#include <gradsync/slicing/fixed_slices.hpp>

using namespace gradsync;

TEST_CASE("Fifo puts every unit in one lane") {
  const ModelLayout layout{{"a", 10}, {"b", 20}};
  const priority::Fifo p;
  REQUIRE(p.levels(layout) == 1);
  for (const Unit& u : slicing::FixedSlices{.max_elements = 7}.plan(layout)) REQUIRE(p.key(u) == 0);
}
