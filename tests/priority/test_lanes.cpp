#include <catch2/catch.hpp>

#include <thread>

#include <gradsync/priority/lanes.hpp>

using gradsync::priority::Lanes;

TEST_CASE("lanes serve the lowest key first and FIFO within a key") {
  Lanes lanes({2, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0, 0, 0, 0, 0, 0, 0, 0, 1});  // 71 lanes: spans two bitmap words
  lanes.push(70, 100);
  lanes.push(1, 10);
  lanes.push(2, 20);
  lanes.push(1, 11);
  lanes.push(0, 1);
  std::vector<std::uint32_t> order;
  while (auto u = lanes.try_pop()) order.push_back(*u);
  REQUIRE(order == std::vector<std::uint32_t>{1, 10, 11, 20, 100});
  REQUIRE_FALSE(lanes.try_pop());
}

TEST_CASE("a full lane is an error, not a silent drop") {
  Lanes lanes({1});
  lanes.push(0, 1);
  REQUIRE_THROWS_AS(lanes.push(0, 2), gradsync::UsageError);
}

TEST_CASE("one producer and one consumer thread lose and duplicate nothing") {
  constexpr std::uint32_t kUnits = 20000, kLevels = 300;
  std::vector<std::size_t> cap(kLevels, 0);
  for (std::uint32_t u = 0; u < kUnits; ++u) ++cap[u % kLevels];
  Lanes lanes(cap);
  std::vector<int> seen(kUnits, 0);
  std::thread consumer([&] {
    for (std::uint32_t got = 0; got < kUnits;) {
      const auto before = lanes.pushes();
      if (auto u = lanes.try_pop()) {
        ++seen[*u];
        ++got;
      } else {
        lanes.wait_for_push(before);
      }
    }
  });
  for (std::uint32_t u = 0; u < kUnits; ++u) lanes.push(u % kLevels, u);
  consumer.join();
  for (int s : seen) REQUIRE(s == 1);
}
