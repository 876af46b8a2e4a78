// collective/ring.hpp: the pipelined ring and its copy-free fp32 sends.
#include <catch2/catch.hpp>

#include "support/collective_cases.hpp"
#include "support/rendezvous.hpp"

using namespace gradsync;
using testing::Aggregates;
using testing::run_with;
using testing::lossy_case;

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

TEST_CASE("fp32 on 2 ranks is one exchange: a message per segment of the unit, each rank's own plus the other's") {
  // The ring's two steps on 2 ranks send the same bytes in twice the messages; the exchange must
  // give the same mean, bit for bit on both ranks, with no segment written while it is sent (the
  // rendezvous transport's receiver reads the sender's memory when it receives).
  const std::size_t elements = 1000;
  const std::size_t segment_bytes = GENERATE(std::size_t{4000}, std::size_t{1000}, std::size_t{12});
  CAPTURE(segment_bytes);
  testing::RendezvousGroup group(2);
  std::vector<std::vector<float>> data(2, std::vector<float>(elements));
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < elements; ++i) data[r][i] = 0.1f * static_cast<float>(i % 97) + 1.7f * static_cast<float>(r) - 0.3f;
  const auto input = data;
  std::vector<std::size_t> sent(2);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        collective::Workspace ws;
        collective::Job job{.data = data[r], .tag = 7};
        sent[r] = collective::Ring{.segment_bytes = segment_bytes}.run(group.rank(r), codec::Identity{}, job, ws);
      });
  }
  for (std::size_t i = 0; i < elements; ++i) {
    CAPTURE(i);
    REQUIRE(data[0][i] == (input[0][i] + input[1][i]) / 2.0f);
    REQUIRE(std::memcmp(&data[0][i], &data[1][i], sizeof(float)) == 0);
  }
  REQUIRE(sent[0] == elements * sizeof(float));  // what the ring sends on 2 ranks: 2(N-1)/N of the unit
  REQUIRE(sent[1] == sent[0]);
  const std::size_t per_rank = (elements * sizeof(float) + segment_bytes - 1) / segment_bytes;
  REQUIRE(group.async_sends() == 2 * per_rank);  // the ring's two steps: twice as many
}
