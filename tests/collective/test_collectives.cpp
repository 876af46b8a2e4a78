// Every collective against the reference: ReduceBroadcast, Hierarchical and Hybrid (and Ring /
// ParameterServer on the codec-generic path) on 1-7 in-process ranks give the reference mean,
// exactly for fp32 and within the codec's bound for a lossy non-summable codec, identical on every
// rank. Each collective's own behaviour is in test_<header>.cpp beside this file.
#include <catch2/catch.hpp>

#include "support/collective_cases.hpp"

using namespace gradsync;
using testing::Aggregates;
using testing::lossy_case;

TEST_CASE("every new collective gives the reference mean with fp32 on 1-7 ranks") {
  const int ranks = GENERATE(1, 2, 3, 4, 5, 6, 7);
  const std::string collective = GENERATE("reduce-broadcast", "hierarchical", "hierarchical:1", "hierarchical:2",
                                          "hierarchical:3", "hierarchical:8", "hybrid", "hybrid:4KiB:2");
  for (const char* slicing : {"whole", "fixed:1000", "fusion:4KiB"}) {
    const PolicyNames names{slicing, "forward", "fp32", collective};
    CAPTURE(ranks, collective, slicing);
    const auto got = testing::run_ranks<Aggregates>(
        ranks, [&](int r, transport::Transport& t) { return testing::train(r, t, names, true); });
    testing::require_reference(got[0], ranks, true);
    for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
  }
}

TEST_CASE("new collectives give the sum by option") {
  const int ranks = GENERATE(3, 4);
  const std::string collective = GENERATE("reduce-broadcast", "hierarchical:2", "hybrid:4KiB:3");
  const PolicyNames names{"fixed:1000", "forward", "fp32", collective};
  CAPTURE(ranks, collective);
  const auto got = testing::run_ranks<Aggregates>(
      ranks, [&](int r, transport::Transport& t) { return testing::train(r, t, names, false); });
  testing::require_reference(got[0], ranks, false);
}

TEST_CASE("a lossy non-summable codec: within its bound and bit-identical on every rank") {
  const int ranks = GENERATE(1, 2, 3, 4, 5, 7);
  CAPTURE(ranks);
  SECTION("ring") { lossy_case(collective::Ring{}, ranks); }
  SECTION("ps") { lossy_case(collective::ParameterServer{}, ranks); }
  SECTION("reduce-broadcast") { lossy_case(collective::ReduceBroadcast{}, ranks); }
  SECTION("hierarchical:2") { lossy_case(collective::Hierarchical{.group = 2}, ranks); }
  SECTION("hierarchical:3") { lossy_case(collective::Hierarchical{.group = 3}, ranks); }
  SECTION("hybrid") { lossy_case(collective::Hybrid{.threshold_bytes = 2000, .small = {.group = 2}}, ranks); }
}

TEST_CASE("the lossy codec is really lossy (the bound above is not vacuous)") {
  const auto got = testing::run_ranks<Aggregates>(2, [&](int r, transport::Transport& t) {
    Synchronizer<slicing::WholeLayer, priority::Fifo, testing::RoundBf16, collective::Ring> sync(t, testing::uneven_layout());
    return testing::train_with(sync, r);
  });
  const auto exact = testing::run_ranks<Aggregates>(
      2, [&](int r, transport::Transport& t) { return testing::train(r, t, {"whole", "fifo", "fp32", "ring"}, true); });
  REQUIRE_FALSE(testing::bit_identical(got[0], exact[0]));
}
