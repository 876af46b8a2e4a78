// collective/hierarchical.hpp
#include <catch2/catch.hpp>

#include <gradsync/collective/hierarchical.hpp>

using namespace gradsync;

TEST_CASE("hierarchical groups: automatic size, clamped to the ranks") {
  using collective::Hierarchical;
  REQUIRE(Hierarchical{}.group_size(4) == 2);
  REQUIRE(Hierarchical{}.group_size(32) == 4);
  REQUIRE(Hierarchical{}.group_size(1) == 1);
  REQUIRE(Hierarchical{.group = 8}.group_size(3) == 3);
  REQUIRE_THROWS_AS(Hierarchical{.group = -1}.group_size(3), UsageError);
}
