// sim::median: the middle value, the mean of the two middle ones for an even count.
#include <catch2/catch.hpp>

#include <gradsync/sim/median.hpp>

TEST_CASE("median: the middle of a sample in any order, the mean of the middle two for an even count") {
  using gradsync::sim::median;
  CHECK(median({3.0}) == 3.0);
  CHECK(median({5.0, 1.0, 3.0}) == 3.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(median({0.0, 0.0, 7.0, 1.0}) == 0.5);
  CHECK_THROWS_AS(median({}), std::invalid_argument);
}
