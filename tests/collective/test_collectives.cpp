// ReduceBroadcast, Hierarchical and Hybrid (and Ring / ParameterServer on the codec-generic path)
// on 1-7 in-process ranks: the reference mean, exactly for fp32 and within the codec's bound for a
// lossy non-summable codec, identical on every rank.
#include <catch2/catch.hpp>

#include "support/lossy_codec.hpp"
#include "support/reference.hpp"
#include "support/rendezvous.hpp"

using namespace gradsync;
using testing::Aggregates;

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

namespace {
template <class Codec, class K>
std::vector<Aggregates> run_with(K collective, int ranks, Codec codec = {}) {
  using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, Codec, K>;
  return testing::run_ranks<Aggregates>(ranks, [&](int r, transport::Transport& t) {
    Sync sync(t, testing::uneven_layout(), {}, {.slicing = {.max_elements = 1000}, .codec = codec, .collective = collective});
    return testing::train_with(sync, r);
  });
}

template <class K>
void lossy_case(K collective, int ranks) {
  const auto got = run_with<testing::RoundBf16>(collective, ranks);
  // every encode of a partial or final sum adds at most 2^-8 of the summed magnitudes
  testing::require_reference(got[0], ranks, true, (ranks + 3) * testing::RoundBf16::max_relative_error);
  for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));  // lossy, yet identical
}
}  // namespace

TEST_CASE("the pipelined ring: many segments per chunk give the same guarantees") {
  const int ranks = GENERATE(2, 3, 4, 7);
  const std::size_t segment_bytes = GENERATE(12, 256, 4000);  // from a few elements to one segment
  const collective::Ring ring{.segment_bytes = segment_bytes};
  CAPTURE(ranks, segment_bytes);
  SECTION("fp32, received in place and forwarded from the unit") {
    const auto got = run_with<codec::Identity>(ring, ranks);
    testing::require_reference(got[0], ranks, true);
    for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
  }
  SECTION("a lossy non-summable codec, re-encoded and forwarded verbatim") { lossy_case(ring, ranks); }
  SECTION("qsgd8: stochastic, yet identical on every rank and from run to run") {
    const codec::Qsgd<8> qsgd{.bypass_below = 0};
    const auto got = run_with(ring, ranks, qsgd);
    for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
    REQUIRE(testing::bit_identical(got[0], run_with(ring, ranks, qsgd)[0]));
    // the 1000-element units really were cut (one segment per chunk gives other random bits)
    if (ranks > 1 && qsgd.encoded_bytes(1000 / ranks) > segment_bytes) REQUIRE_FALSE(testing::bit_identical(got[0], run_with(collective::Ring{}, ranks, qsgd)[0]));
  }
}

TEST_CASE("the ring's copy-free fp32 sends never let a segment change while it is being sent") {
  // Over a transport whose receivers read the sender's memory at receive time: a ring that wrote
  // a segment still in flight would deliver the wrong values.
  const int ranks = GENERATE(2, 3, 4, 7);
  const std::size_t segment_bytes = GENERATE(12, 256, 4000);
  const std::string collective = GENERATE(as<std::string>{}, "ring", "hierarchical:2");
  CAPTURE(ranks, segment_bytes, collective);
  testing::RendezvousGroup group(ranks);
  std::vector<Aggregates> got(ranks);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::AnyCollective>;
        auto k = collective::AnyCollective::parse(collective);
        if (auto* ring = std::get_if<collective::Ring>(&k.policy)) ring->segment_bytes = segment_bytes;
        Sync sync(group.rank(r), testing::uneven_layout(), Options{.inflight_units = 3},
                  {.slicing = {.max_elements = 1000}, .collective = k});
        got[r] = testing::train_with(sync, r);
      });
  }
  testing::require_reference(got[0], ranks, true);
  for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
  if (collective == "ring" || ranks > 2) REQUIRE(group.async_sends() > 0);  // the copy-free path ran (leaders' ring)
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

TEST_CASE("hierarchical groups: automatic size, clamped to the ranks") {
  using collective::Hierarchical;
  REQUIRE(Hierarchical{}.group_size(4) == 2);
  REQUIRE(Hierarchical{}.group_size(32) == 4);
  REQUIRE(Hierarchical{}.group_size(1) == 1);
  REQUIRE(Hierarchical{.group = 8}.group_size(3) == 3);
  REQUIRE_THROWS_AS(Hierarchical{.group = -1}.group_size(3), UsageError);
}

TEST_CASE("collective names parse with their knobs, and bad ones are rejected with the valid list") {
  using collective::AnyCollective;
  REQUIRE(AnyCollective::parse("reduce-broadcast").name() == "reduce-broadcast");
  REQUIRE(std::get<collective::Hierarchical>(AnyCollective::parse("hierarchical:4").policy).group == 4);
  REQUIRE(std::get<collective::Hierarchical>(AnyCollective::parse("hierarchical").policy).group == 0);
  const auto h = std::get<collective::Hybrid>(AnyCollective::parse("hybrid:1MiB:2").policy);
  REQUIRE(h.threshold_bytes == (1u << 20));
  REQUIRE(h.small.group == 2);
  REQUIRE(std::get<collective::Hybrid>(AnyCollective::parse("hybrid:64KiB").policy).threshold_bytes == 65536);
  for (const char* bad : {"hierarchical:0", "hierarchical:x", "hierarchical:2x", "hybrid:", "hybrid:abc",
                          "hybrid:1MiB:0", "reduce-broadcast:2", "ring:3", "rign"})
    REQUIRE_THROWS_WITH(AnyCollective::parse(bad), Catch::Contains("valid: ring, ps, reduce-broadcast"));
#if !defined(GRADSYNC_WITH_MPI)
  REQUIRE_THROWS_WITH(AnyCollective::parse("mpi"), Catch::Contains("needs gradsync built with MPI"));
#endif
}

TEST_CASE("ranks that differ in a collective's knobs fail the handshake, naming them") {
  const auto fails = [](const char* a, const char* b) {
    return testing::run_ranks<int>(2, [&](int r, transport::Transport& t) {
      AnySynchronizer sync(t, testing::uneven_layout(), {"fixed:1000", "forward", "fp32", r == 0 ? a : b});
      return 0;
    });
  };
  REQUIRE_THROWS_WITH(fails("hierarchical:2", "hierarchical:3"), Catch::Contains("/hierarchical:3/"));
  REQUIRE_THROWS_WITH(fails("hybrid:1MiB", "hybrid:2MiB"), Catch::Contains("/hybrid:1048576/"));
  REQUIRE_NOTHROW(fails("hybrid:1MiB", "hybrid:1024KiB"));
}
