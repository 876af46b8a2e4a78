// A rank that fails stops every rank at once with its message, whatever the collective: the
// failing rank tells its peers (Synchronizer::abort, or an error on one of its threads), and
// their waits end without waiting out the timeout.
#include <catch2/catch.hpp>

#include <atomic>
#include <optional>
#include <random>
#include <thread>

#include <gradsync/any_synchronizer.hpp>
#include <gradsync/schedule/tags.hpp>
#include <gradsync/schedule/watchdog.hpp>

#include "support/forwarding.hpp"
#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;

namespace {
/// QSGD-4 that throws in the encode of unit `unit`, on the ranks where it is armed.
struct Failing {
  codec::Qsgd<4> inner{.bypass_below = 0};
  bool armed = false;
  std::uint64_t unit = 0;

  std::string_view name() const { return "failing-qsgd4"; }
  codec::Traits traits() const { return inner.traits(); }
  std::size_t encoded_bytes(std::size_t n) const { return inner.encoded_bytes(n); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const codec::EncodeContext& ctx) const {
    if (armed && ctx.unit == unit) throw std::runtime_error("injected failure in unit " + std::to_string(unit));
    return inner.encode(in, out, ctx);
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const { inner.decode(wire, out); }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const { inner.decode_add(wire, acc); }
};
GRADSYNC_CHECK_CODEC(Failing);

using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, Failing, collective::AnyCollective>;
const ModelLayout kLayout{{"a", 3000}, {"b", 5000}, {"c", 2000}, {"d", 4000}};

/// A rank's transport that goes silent at once when `dead` is set, as when its process is killed
/// or its cable pulled: nothing it sends arrives, and it hears nothing.
class Dying final : public testing::Forwarding {
 public:
  Dying(transport::Transport& inner, const std::atomic<bool>& dead) : Forwarding(inner), dead_(dead) {}
  void send(int dst, transport::Tag tag, std::span<const std::byte> data) override {
    if (!dead_) inner_.send(dst, tag, data);
  }
  std::optional<std::size_t> recv_for(int src, transport::Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    if (!dead_) return inner_.recv_for(src, tag, out, wait);
    std::this_thread::sleep_for(wait);
    return std::nullopt;
  }
  std::optional<std::size_t> try_recv(int src, transport::Tag tag, std::span<std::byte> out) override {
    return dead_ ? std::nullopt : inner_.try_recv(src, tag, out);
  }

 private:
  const std::atomic<bool>& dead_;
};

/// One buffer per layer. Declared before the synchronizer: a rank that leaves mid-iteration still
/// has units in flight that write into the buffers until the synchronizer's destructor joins them.
using Gradients = std::vector<std::vector<float>>;

/// Trains until something throws; returns the message (empty if nothing did).
std::string train_until_failure(Sync& sync, Gradients& g, int rank) {
  g.assign(kLayout.num_layers(), {});
  try {
    for (int it = 0; it < 50; ++it) {
      for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);
      for (std::size_t l = g.size(); l-- > 0;) {
        g[l].assign(kLayout.layer(l).elements, testing::grad_value(rank, l, it, 0));
        sync.gradient_ready(l, g[l]);
      }
      sync.finish_iteration();
    }
    sync.wait_all();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

/// Hands over gradients of ones each iteration, in backward order; `leave(it, layer)` returning a
/// text ends the run before that layer's hand-over with it. Otherwise returns the first error's
/// text, or "finished".
template <class Leave>
std::string train_ones(AnySynchronizer& sync, Gradients& g, int iterations, Leave&& leave) {
  g.assign(kLayout.num_layers(), {});
  try {
    for (int it = 0; it < iterations; ++it) {
      for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);
      for (std::size_t l = g.size(); l-- > 0;) {
        if (auto text = leave(it, l)) return *text;
        g[l].assign(kLayout.layer(l).elements, 1.0f);
        sync.gradient_ready(l, g[l]);
      }
      sync.finish_iteration();
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "finished";
}
}  // namespace

TEST_CASE("an error on one rank's thread stops every rank at once with that rank's message", "[abort]") {
  const std::string collective = GENERATE("ring", "ps", "reduce-broadcast", "hierarchical:2", "hybrid");
  const int ranks = GENERATE(2, 3, 4);
  std::mt19937 pick(static_cast<unsigned>(ranks * 31 + collective.size()));
  const int failing = static_cast<int>(pick() % static_cast<unsigned>(ranks));
  Failing codec;
  codec.unit = pick() % 4;  // units of 3000 / 5000 / 2000 / 4000 at slices of 5000: one per layer
  CAPTURE(collective, ranks, failing, codec.unit);
  const auto t0 = std::chrono::steady_clock::now();
  const auto errors = testing::run_ranks<std::string>(
      ranks,
      [&](int r, transport::Transport& t) {
        Failing mine = codec;
        mine.armed = r == failing;
        Gradients g;
        Sync sync(t, kLayout, Options{.timeout = 60s},
                  {.slicing = {.max_elements = 5000}, .codec = mine, .collective = collective::AnyCollective::parse(collective)});
        return train_until_failure(sync, g, r);
      },
      60s);
  const auto took = std::chrono::steady_clock::now() - t0;
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r, errors[r]);
    REQUIRE_THAT(errors[r], Catch::Contains("injected failure in unit " + std::to_string(codec.unit)));
    if (r != failing) REQUIRE_THAT(errors[r], Catch::Contains("rank " + std::to_string(failing) + " failed"));
  }
  REQUIRE(took < 10s);  // not the 60 s timeout
}

TEST_CASE("abort() from the training loop stops every peer with the reason", "[abort]") {
  const auto t0 = std::chrono::steady_clock::now();
  const auto errors = testing::run_ranks<std::string>(3, [](int r, transport::Transport& t) -> std::string {
    Gradients g;
    AnySynchronizer sync(t, kLayout, {"fixed:5000", "forward", "fp32", "ring"}, Options{.timeout = 60s});
    return train_ones(sync, g, 20, [&](int it, std::size_t l) -> std::optional<std::string> {
      if (it != 3 || r != 2 || l + 1 != kLayout.num_layers()) return std::nullopt;
      sync.abort("loss is nan at iteration 3");  // after the waits, before any hand-over
      return "aborted";
    });
  }, 60s);
  REQUIRE(errors[2] == "aborted");
  for (int r : {0, 1}) {
    CAPTURE(errors[r]);
    REQUIRE_THAT(errors[r], Catch::Contains("rank 2 failed") && Catch::Contains("loss is nan at iteration 3"));
  }
  REQUIRE(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("a synchronizer destroyed in the middle of an iteration tells its peers", "[abort]") {
  const auto errors = testing::run_ranks<std::string>(2, [](int r, transport::Transport& t) -> std::string {
    std::vector<std::vector<float>> g(kLayout.num_layers(), std::vector<float>(5000, 1.0f));
    try {
      AnySynchronizer sync(t, kLayout, {"fixed:5000", "forward", "fp32", "ps"}, Options{.timeout = 60s});
      for (std::size_t l = g.size(); l-- > 0;) {
        if (r == 1 && l == 1) return "left";  // unwinds with layers 0 and 1 never handed over
        sync.gradient_ready(l, std::span(g[l]).first(kLayout.layer(l).elements));
      }
      sync.finish_iteration();
      sync.wait_all();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "finished";
  }, 60s);
  REQUIRE(errors[1] == "left");
  REQUIRE_THAT(errors[0], Catch::Contains("rank 1 failed") && Catch::Contains("middle of iteration 0"));
}

TEST_CASE("an abort left over from an earlier synchronizer on the same transport is ignored", "[abort]") {
  transport::InProcessGroup group(2);
  const auto stale = std::as_bytes(std::span("\0\0\0\0\0\0\0\0old failure", 20));
  group.rank(0).send(1, schedule::abort_tag, stale);
  const auto got = testing::run_ranks<int>(2, [&](int r, transport::Transport&) {
    AnySynchronizer sync(group.rank(r), kLayout, {"fixed:5000", "forward", "fp32", "ring"});
    std::vector<std::vector<float>> g(kLayout.num_layers());
    for (int it = 0; it < 3; ++it) {
      for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);  // the aggregate lands in g[l]
      for (std::size_t l = g.size(); l-- > 0;) {
        g[l].assign(kLayout.layer(l).elements, 1.0f);
        sync.gradient_ready(l, g[l]);
      }
      sync.finish_iteration();
      std::this_thread::sleep_for(30ms);  // the watcher polls meanwhile
    }
    sync.wait_all();
    return 1;
  });
  REQUIRE(got == std::vector<int>{1, 1});
}

// A dead rank sends nothing, so a survivor's timeout names only the rank it waited for - in a
// ring, rank 1 waits for rank 0, which waits for the dead one. The survivors settle it between
// them (schedule::Watchdog): each names the rank that went silent.
TEST_CASE("when a rank dies, every survivor names the dead rank, not the neighbour it waited for", "[abort]") {
  const std::string collective = GENERATE("ring", "ps");
  const int ranks = GENERATE(3, 4);
  const int dead_rank = GENERATE_COPY(0, ranks - 1);  // rank 0 decides the schedule: its followers wait for it
  CAPTURE(collective, ranks, dead_rank);
  std::atomic<bool> dead{false};
  const std::atomic<bool> never{false};
  const auto t0 = std::chrono::steady_clock::now();
  const auto errors = testing::run_ranks<std::string>(
      ranks,
      [&](int r, transport::Transport& inner) -> std::string {
        Dying t(inner, r == dead_rank ? dead : never);
        Gradients g;
        AnySynchronizer sync(t, kLayout, {"fixed:5000", "forward", "fp32", collective}, Options{.timeout = 800ms});
        return train_ones(sync, g, 50, [&](int it, std::size_t l) -> std::optional<std::string> {
          if (r != dead_rank || it != 3 || l != 1) return std::nullopt;
          dead = true;                          // dies in the middle of iteration 3
          std::this_thread::sleep_for(3s);      // the survivors must not need it to end
          return "dead";
        });
      },
      60s);
  REQUIRE(errors[dead_rank] == "dead");
  for (int r = 0; r < ranks; ++r) {
    if (r == dead_rank) continue;
    CAPTURE(r, errors[r]);
    REQUIRE_THAT(errors[r], Catch::Contains("rank " + std::to_string(dead_rank) + " stopped answering") &&
                                Catch::Contains("died or its network is down"));
  }
  REQUIRE(std::chrono::steady_clock::now() - t0 < 10s);
}
