// Every slicing x priority x collective on 1, 2, 3, 4 and 7 ranks gives the reference mean (or
// sum), identically on every rank and bit-identically from run to run.
#include <catch2/catch.hpp>

#include "support/reference.hpp"

using namespace gradsync;

using testing::Aggregates;
using testing::bit_identical;
using testing::require_reference;
using testing::train;

TEST_CASE("every slicing x priority x collective gives the reference mean on 1-7 ranks") {
  const int ranks = GENERATE(1, 2, 3, 4, 7);
  const std::string collective = GENERATE("ring", "ps");
  for (const char* slicing : {"whole", "fixed:1000", "fusion:4KiB", "slicefuse:2000", "split:3:1000"})
    for (const char* priority : {"fifo", "forward"}) {
      const PolicyNames names{slicing, priority, "fp32", collective};
      CAPTURE(ranks, collective, slicing, priority);
      auto fn = [&](int r, transport::Transport& t) { return train(r, t, names, true); };
      const auto first = testing::run_ranks<Aggregates>(ranks, fn);
      require_reference(first[0], ranks, true);
      for (int r = 1; r < ranks; ++r) REQUIRE(bit_identical(first[0], first[r]));  // same on every rank
      const auto again = testing::run_ranks<Aggregates>(ranks, fn);
      REQUIRE(bit_identical(first[0], again[0]));  // and the same from run to run
    }
}

TEST_CASE("the sum instead of the mean, by option") {
  const int ranks = GENERATE(2, 3);
  const std::string collective = GENERATE("ring", "ps");
  const PolicyNames names{"fixed:1000", "forward", "fp32", collective};
  const auto got = testing::run_ranks<Aggregates>(
      ranks, [&](int r, transport::Transport& t) { return train(r, t, names, false); });
  require_reference(got[0], ranks, false);
}

TEST_CASE("statistics count units, bytes and iterations") {
  const ModelLayout layout{{"a", 1000}, {"b", 10}};
  const auto stats = testing::run_ranks<Statistics>(2, [&](int, transport::Transport& t) {
    Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::ParameterServer> sync(
        t, layout, {}, {.slicing = {.max_elements = 500}});
    std::vector<float> a(1000, 1.0f), b(10, 2.0f);
    sync.gradient_ready(1, b);
    sync.gradient_ready(0, a);
    sync.finish_iteration();
    sync.wait_all();
    return sync.stats();
  });
  // 3 units (500, 500, 10); each rank serves some and pushes the others, fp32 as raw floats
  REQUIRE(stats[0].units == 3);
  REQUIRE(stats[0].iterations == 1);
  REQUIRE(stats[0].bytes_sent + stats[1].bytes_sent == 2 * 1010 * 4);
  REQUIRE(stats[0].elements == 1010);
  REQUIRE(stats[0].elements_compressed == 0);  // fp32 compresses nothing
  REQUIRE(stats[0].wire_seconds > 0);
}
