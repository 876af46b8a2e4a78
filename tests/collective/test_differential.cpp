// DGT's differential transmission (collective/differential_ps.hpp, its wire in differential.hpp):
// the parameter server's deadline
// with datagrams deliberately lost, the residual bringing dropped gradient mass back, identical
// replicas, a resume continuing bit-identically, and every kind of bad datagram refused.
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>

#include <gradsync/collective/differential_ps.hpp>

#include <gradsync/any_synchronizer.hpp>
#include <gradsync/codec/identity.hpp>
#include <gradsync/priority/forward_order.hpp>
#include <gradsync/slicing/fixed_slices.hpp>

#include "support/memory_channels.hpp"
#include "support/ranks.hpp"

using namespace gradsync;

namespace {
using testing::MemoryChannels;

using Dgt = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::DifferentialPs>;
const ModelLayout kLayout{{"conv.weight", 9000}, {"conv.bias", 40}, {"fc.weight", 5000}};

float gradient(int rank, std::size_t layer, int iteration, std::size_t i) {
  return testing::grad_value(rank, layer, iteration, i) * (i % 1024 < 300 ? 4.0f : 1.0f);  // some blocks matter more
}

struct Outcome {
  std::vector<std::vector<std::vector<float>>> aggregates;  // [iteration][layer][element]
  std::vector<float> residuals;
  std::vector<float> state;  // Synchronizer::state() at the end
  std::vector<Unit> units;
  Statistics stats;
  std::uint64_t important() const { return stats.counter("blocks important"); }
  std::uint64_t best_effort() const { return stats.counter("blocks best-effort"); }
  std::uint64_t dropped() const { return stats.counter("blocks dropped"); }
};

/// Iterations [first, first + iterations) of DGT in sum mode, the loss ratio `final_ratio` after
/// iteration 0 (a unit classifies with it from iteration 2: rank 0's ratio reaches every rank
/// with the unit's broadcast); each rank restores from[rank]'s state first when given.
std::vector<Outcome> run_dgt(int ranks, MemoryChannels* channels, int iterations, float final_ratio, int first = 0,
                             const std::vector<Outcome>* from = nullptr) {
  return testing::run_ranks<Outcome>(ranks, [&](int r, transport::Transport& t) {
    collective::DifferentialPs dgt{.block = 512};
    if (channels) dgt.best_effort_channel = [&](transport::Transport& tt) { return channels->channel(tt.rank()); };
    Dgt sync(t, kLayout, Options{.average = false}, {.slicing = {.max_elements = 4000}, .collective = dgt});
    if (from) sync.restore(first, (*from)[r].state);
    Outcome o;
    for (int it = first; it < first + iterations; ++it) {
      sync.report_loss(it == 0 ? 2.0f : 2.0f * final_ratio);
      std::vector<std::vector<float>> g(kLayout.num_layers());
      for (std::size_t l = g.size(); l-- > 0;) {
        g[l].resize(kLayout.layer(l).elements);
        for (std::size_t i = 0; i < g[l].size(); ++i) g[l][i] = gradient(r, l, it, i);
        sync.gradient_ready(l, g[l]);
      }
      sync.finish_iteration();
      sync.wait_all();
      o.aggregates.push_back(std::move(g));
    }
    o.residuals.assign(sync.residuals().begin(), sync.residuals().end());
    o.state = sync.state();
    o.units = sync.units();
    o.stats = sync.stats();
    return o;
  });
}

/// Per element: delivered over all iterations + every rank's residual - all gradients sent.
double worst_lost_mass(const std::vector<Outcome>& got, int iterations) {
  const int ranks = static_cast<int>(got.size());
  std::vector<std::vector<double>> balance(kLayout.num_layers());
  for (std::size_t l = 0; l < kLayout.num_layers(); ++l) {
    balance[l].assign(kLayout.layer(l).elements, 0.0);
    for (std::size_t i = 0; i < balance[l].size(); ++i)
      for (int it = 0; it < iterations; ++it) {
        balance[l][i] += got[0].aggregates[it][l][i];
        for (int r = 0; r < ranks; ++r) balance[l][i] -= gradient(r, l, it, i);
      }
  }
  for (const Outcome& o : got) {
    std::size_t at = 0;
    for (const Unit& u : o.units)
      for (const Segment& s : u.segments)
        for (std::size_t i = 0; i < s.length; ++i) balance[s.layer][s.offset + i] += o.residuals[at++];
  }
  double worst = 0;
  for (const auto& layer : balance)
    for (double b : layer) worst = std::max(worst, std::abs(b));
  return worst;
}
}  // namespace

TEST_CASE("DGT over the parameter server: late blocks dropped at the deadline, kept in the residual, mass conserved",
          "[dgt]") {
  const int ranks = GENERATE(2, 3, 4);
  constexpr int iterations = 5;
  // Every 3rd datagram from every rank is lost on the way.
  MemoryChannels lossy(ranks, [](int, int, int n) { return n % 3 == 0; });
  const auto got = run_dgt(ranks, &lossy, iterations, 0.5f);
  for (int r = 1; r < ranks; ++r) REQUIRE(got[r].aggregates == got[0].aggregates);  // identical replicas
  Statistics all;
  for (const Outcome& o : got) all += o.stats;
  const std::uint64_t important = all.counter("blocks important"), best_effort = all.counter("blocks best-effort"),
                      dropped = all.counter("blocks dropped");
  CAPTURE(ranks, important, best_effort, dropped);
  REQUIRE(important > 0);
  REQUIRE(best_effort > 0);  // p fell with the loss: some blocks went best-effort
  REQUIRE(dropped > 0);      // and some of those were lost
  REQUIRE(dropped < best_effort);
  const double lost = worst_lost_mass(got, iterations);
  CAPTURE(lost);
  REQUIRE(lost < 1e-4 * ranks * iterations);  // nothing lost for good: the residuals hold it
  REQUIRE(std::ranges::any_of(got[0].residuals, [](float x) { return x != 0.0f; }));
}

TEST_CASE("DGT with no loss on the way equals the reliable parameter server - with the loss flat all blocks are important",
          "[dgt]") {
  const int ranks = 3;
  MemoryChannels perfect(ranks, [](int, int, int) { return false; });
  const auto got = run_dgt(ranks, &perfect, 3, 0.5f);
  const auto flat = run_dgt(ranks, &perfect, 3, 1.0f);
  CHECK(flat[0].important() > 0);
  CHECK(flat[0].best_effort() == 0);
  CHECK(got[0].best_effort() > 0);
  CHECK(got[0].dropped() == 0);
  for (int it = 0; it < 3; ++it)
    for (std::size_t l = 0; l < kLayout.num_layers(); ++l)
      for (std::size_t i = 0; i < kLayout.layer(l).elements; ++i) {
        double sum = 0;
        for (int r = 0; r < ranks; ++r) sum += gradient(r, l, it, i);
        REQUIRE(got[0].aggregates[it][l][i] == Approx(sum).margin(1e-5));
      }
}

// Iterations 0 and 1 send everything (the loss ratio they classify with is 1), so iteration 2
// starts with empty residuals: with every datagram lost, each element of its aggregate is all
// ranks' sum (important) or 0 (left out, the server's own share too), never the server's share
// alone; and the server's broadcast skips what it left out, so every rank sends fewer bytes than
// with nothing lost.
TEST_CASE("DGT's aggregate holds every rank's share of a piece or none, and the broadcast skips the rest", "[dgt]") {
  const int ranks = GENERATE(2, 3);
  MemoryChannels lost(ranks, [](int, int, int) { return true; });
  MemoryChannels perfect(ranks, [](int, int, int) { return false; });
  const auto dropped = run_dgt(ranks, &lost, 3, 0.3f);
  const auto delivered = run_dgt(ranks, &perfect, 3, 0.3f);
  std::size_t zeros = 0, sums = 0;
  for (std::size_t l = 0; l < kLayout.num_layers(); ++l)
    for (std::size_t i = 0; i < kLayout.layer(l).elements; ++i) {
      double sum = 0;
      for (int r = 0; r < ranks; ++r) sum += gradient(r, l, 2, i);
      const float got = dropped[0].aggregates[2][l][i];
      CAPTURE(ranks, l, i, sum, got);
      REQUIRE(dropped[0].aggregates[1][l][i] == Approx([&] {
                double s1 = 0;
                for (int r = 0; r < ranks; ++r) s1 += gradient(r, l, 1, i);
                return s1;
              }()).margin(1e-5));  // iteration 1: everything important, nothing dropped
      REQUIRE(delivered[0].aggregates[2][l][i] == Approx(sum).margin(1e-5));
      if (got == 0.0f) {
        ++zeros;
      } else {
        REQUIRE(got == Approx(sum).margin(1e-5));
        ++sums;
      }
    }
  CAPTURE(zeros, sums);
  CHECK(zeros > 0);
  CHECK(sums > 0);
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK(dropped[r].dropped() > 0);
    CHECK(dropped[r].stats.bytes_sent < delivered[r].stats.bytes_sent);
  }
  CHECK(worst_lost_mass(dropped, 3) < 1e-4);
}

// Half the blocks carry 2.8x the others' mean |g| and p stays at 0.5, so by the gradient alone the
// light blocks would lose every ranking; with every datagram lost they would never be delivered.
// The ranks report mean |gradient + residual|, so a light block's held-back mass raises its
// contribution until it goes reliably: every element is delivered within a few iterations.
TEST_CASE("DGT: a block whose drops pile up becomes important - no block waits forever", "[dgt]") {
  MemoryChannels lost(2, [](int, int, int) { return true; });
  constexpr int iterations = 16;
  const auto got = run_dgt(2, &lost, iterations, 0.5f);
  std::size_t never = 0;
  for (std::size_t l = 0; l < kLayout.num_layers(); ++l)
    for (std::size_t i = 0; i < kLayout.layer(l).elements; ++i) {
      bool delivered = false;
      for (int it = 2; it < iterations; ++it) delivered = delivered || got[0].aggregates[it][l][i] != 0.0f;
      never += !delivered;
    }
  CHECK(got[0].dropped() > 0);
  CHECK(never == 0);
  CHECK(worst_lost_mass(got, iterations) < 1e-3);
}

// DGT learns every block's contribution, and p follows loss_t / loss_0, rank 0's ratio reaching
// each unit with its last broadcast: a resumed run classifies as the interrupted one would have
// only if state() carries all three besides the residuals. Every datagram is lost, so what
// arrives follows the classification alone.
TEST_CASE("DGT resumed from state() continues bit-identically - contributions, ratios and loss_0 restored", "[dgt]") {
  const int ranks = 3;
  MemoryChannels lost(ranks, [](int, int, int) { return true; });
  const auto straight = run_dgt(ranks, &lost, 6, 0.4f);
  const auto half = run_dgt(ranks, &lost, 3, 0.4f);
  const auto resumed = run_dgt(ranks, &lost, 3, 0.4f, 3, &half);
  const std::size_t residuals = half[0].residuals.size(), units = half[0].units.size();
  const std::size_t blocks = half[0].state.size() - residuals - units - 1;
  REQUIRE(blocks > 0);
  REQUIRE(half[0].state.back() == 2.0f);  // loss_0
  for (std::size_t u = 0; u < units; ++u) REQUIRE(half[0].state[residuals + blocks + u] == 0.4f);  // rank 0's ratio
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    for (int it = 0; it < 3; ++it) REQUIRE(resumed[r].aggregates[it] == straight[r].aggregates[3 + it]);
    REQUIRE(resumed[r].state == straight[r].state);
  }
  CHECK(resumed[0].dropped() > 0);

  // Restoring only the residuals (the contributions and ratios from zero, loss_0 from the first loss seen)
  // changes what is delivered: the check above can fail.
  auto forgot = half;
  for (Outcome& o : forgot) std::fill(o.state.begin() + std::ptrdiff_t(residuals), o.state.end(), 0.0f);
  const auto differs = run_dgt(ranks, &lost, 3, 0.4f, 3, &forgot);
  CHECK(differs[0].aggregates != resumed[0].aggregates);

  transport::InProcessGroup g(1);
  Dgt other_block(g.rank(0), kLayout, {}, {.slicing = {.max_elements = 4000}, .collective = {.block = 256}});
  CHECK_THROWS_WITH(other_block.restore(3, half[0].state), Catch::Contains("same model, slicing, priority, codec and collective"));
}

TEST_CASE("DGT over real UDP sockets (loopback or this host's address)", "[dgt]") {
  const auto got = run_dgt(2, nullptr, 4, 0.3f);
  REQUIRE(got[1].aggregates == got[0].aggregates);
  CHECK(got[0].best_effort() + got[1].best_effort() > 0);
  CHECK(worst_lost_mass(got, 4) < 1e-3);
}

TEST_CASE("DGT needs fp32 and a Synchronizer, and says so - its old spelling names the new one", "[dgt]") {
  transport::InProcessGroup g(1);
  CHECK_THROWS_WITH(AnySynchronizer(g.rank(0), kLayout, {"fixed:4000", "forward", "qsgd8", "dgt"}),
                    Catch::Contains("collective 'dgt' sends its blocks as raw fp32") &&
                        Catch::Contains("needs a lossless codec (fp32), not 'qsgd8'"));
  CHECK_THROWS_WITH(AnySynchronizer(g.rank(0), kLayout, {"fixed:4000", "dgt", "fp32", "ps"}),
                    Catch::Contains("priority 'dgt' is now collective 'dgt'") && Catch::Contains("priority 'forward'"));
  std::vector<float> data(8, 1.0f);
  collective::Job job{.data = data};
  collective::Workspace ws;
  static_assert(!collective::RunsAlone<collective::DifferentialPs>, "what DGT learns is its state: no run without it");
  CHECK_THROWS_WITH(collective::AnyCollective::parse("dgt").run(g.rank(0), codec::Identity{}, job, ws),
                    Catch::Contains("collective 'dgt' runs a unit with the state its start() made"));
}

// The policy is a value: what a run learns lives in the runtime its Synchronizer owns, so a copy
// made after the run (or a second Synchronizer of the same policies) starts from nothing.
TEST_CASE("DGT's policy is a value: two synchronizers of one policy learn apart", "[dgt]") {
  transport::InProcessGroup g(1);
  const collective::DifferentialPs dgt{.block = 512};
  Dgt a(g.rank(0), kLayout, {}, {.slicing = {.max_elements = 4000}, .collective = dgt});
  a.report_loss(2.0f);
  std::vector<std::vector<float>> grads(kLayout.num_layers());
  for (std::size_t l = grads.size(); l-- > 0;) {
    grads[l].assign(kLayout.layer(l).elements, 1.0f);
    a.gradient_ready(l, grads[l]);
  }
  a.finish_iteration();
  a.wait_all();
  Dgt b(g.rank(0), kLayout, {}, {.slicing = {.max_elements = 4000}, .collective = dgt});
  const auto learned = a.state(), fresh = b.state();
  REQUIRE(learned.size() == fresh.size());
  CHECK(learned.back() == 2.0f);  // a's loss_0
  CHECK(fresh.back() == 0.0f);
  CHECK(std::ranges::all_of(fresh, [](float x) { return x == 0.0f || x == 1.0f; }));  // nothing learned
  CHECK(learned != fresh);
}

namespace {
/// Hands the router a fixed list of datagrams.
struct Scripted final : transport::BestEffort {
  std::deque<std::pair<int, std::vector<std::byte>>> queue;
  void send(int, std::span<const std::byte>) override {}
  std::optional<Received> try_recv(std::span<std::byte> out) override {
    if (queue.empty()) return std::nullopt;
    auto [src, bytes] = std::move(queue.front());
    queue.pop_front();
    std::memcpy(out.data(), bytes.data(), std::min(bytes.size(), out.size()));
    return Received{src, bytes.size()};
  }
  std::string describe() const override { return "scripted"; }
};

std::vector<std::byte> piece(std::uint64_t session, std::int64_t iteration, std::uint32_t unit, std::uint32_t k, int src,
                             std::size_t count, float value) {
  collective::detail::PieceHeader h{.session = session, .iteration = iteration, .unit = unit, .piece = k,
                                    .src = static_cast<std::uint32_t>(src), .count = static_cast<std::uint32_t>(count)};
  std::vector<std::byte> d(sizeof h + 4 * count);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(d.data() + sizeof h + 4 * i, &value, 4);
  std::memcpy(d.data(), &h, sizeof h);
  h.crc = collective::detail::crc_of(d);
  std::memcpy(d.data(), &h, sizeof h);
  return d;
}
}  // namespace

TEST_CASE("the server's router refuses corrupt, foreign, duplicate, misplaced and late datagrams, and counts them",
          "[dgt]") {
  Scripted channel;
  collective::detail::DatagramRouter router(channel, 77, 0, 4);
  const collective::detail::Pieces pieces(1024, 512);  // 2 blocks of 2 pieces of 256
  const std::vector<std::uint8_t> important{1, 0};     // pieces 2 and 3 go best-effort
  std::vector<std::vector<std::uint8_t>> taken(3, std::vector<std::uint8_t>(pieces.count, 0));
  std::vector<std::vector<float>> stage(3, std::vector<float>(1024, 0.0f));
  collective::detail::Inbox box{5, 2, &pieces, important, &taken, &stage};

  auto good = piece(77, 5, 2, 2, 1, 256, 1.5f);
  auto corrupt = good;
  corrupt.back() ^= std::byte{1};
  channel.queue = {{1, piece(77, 5, 2, 3, 1, 256, 2.0f)}};  // early: before the unit collects
  router.pump();
  router.open(box);
  CHECK(taken[1][3] == 1);  // the early piece was kept and applied
  channel.queue = {
      {1, good},                                  // taken
      {1, good},                                  // duplicate
      {1, corrupt},                               // CRC mismatch
      {-1, piece(77, 5, 2, 2, 2, 256, 1.0f)},     // not from a peer
      {2, piece(77, 5, 2, 2, 1, 256, 1.0f)},      // claims another sender
      {2, piece(78, 5, 2, 2, 2, 256, 1.0f)},      // another synchronizer's session
      {2, piece(77, 5, 2, 0, 2, 256, 1.0f)},      // piece of an important block
      {2, piece(77, 5, 2, 9, 2, 256, 1.0f)},      // no such piece
      {2, piece(77, 5, 2, 3, 2, 100, 1.0f)},      // wrong length
      {2, piece(77, 5, 9, 3, 2, 256, 1.0f)},      // no such unit
      {0, piece(77, 5, 2, 3, 0, 256, 1.0f)},      // from the server itself
      {2, std::vector<std::byte>(12)},            // too short
  };
  router.pump();
  CHECK(taken[1][2] == 1);
  CHECK(stage[1][512] == 1.5f);
  CHECK(stage[1][768] == 2.0f);
  CHECK(taken[2] == std::vector<std::uint8_t>(pieces.count, 0));
  CHECK(router.take_rejected() == 11);
  router.close(box);
  channel.queue = {{2, piece(77, 5, 2, 2, 2, 256, 1.0f)}, {2, piece(77, 4, 2, 2, 2, 256, 1.0f)}};  // late, older
  router.pump();
  CHECK(taken[2][2] == 0);
  CHECK(router.take_rejected() == 2);
}
