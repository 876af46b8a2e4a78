// priority/concept.hpp
#include <catch2/catch.hpp>

#include <gradsync/priority/concept.hpp>

using namespace gradsync;

TEST_CASE("priority comparison is strict") {
  REQUIRE(priority::more_urgent(0, 1));
  REQUIRE_FALSE(priority::more_urgent(1, 1));
  REQUIRE_FALSE(priority::more_urgent(2, 1));
}
