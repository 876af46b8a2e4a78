#include <catch2/catch.hpp>

#include <gradsync/priority/any.hpp>
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

TEST_CASE("Fifo puts every unit in one lane") {
  const ModelLayout layout{{"a", 10}, {"b", 20}};
  const priority::Fifo p;
  REQUIRE(p.levels(layout) == 1);
  for (const Unit& u : slicing::FixedSlices{.max_elements = 7}.plan(layout)) REQUIRE(p.key(u) == 0);
}

TEST_CASE("priority comparison is strict") {
  REQUIRE(priority::more_urgent(0, 1));
  REQUIRE_FALSE(priority::more_urgent(1, 1));
  REQUIRE_FALSE(priority::more_urgent(2, 1));
}

TEST_CASE("AnyPriority parses and rejects") {
  REQUIRE(priority::AnyPriority::parse("forward").name() == "forward");
  REQUIRE(priority::AnyPriority::parse("fifo").name() == "fifo");
  REQUIRE_THROWS_WITH(priority::AnyPriority::parse("p3"), Catch::Contains("'p3'") && Catch::Contains("fifo, forward"));
}
