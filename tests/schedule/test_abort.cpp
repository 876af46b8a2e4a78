// A rank that fails stops every rank at once with its message, whatever the collective: the
// failing rank tells its peers (Synchronizer::abort, or an error on one of its threads), and
// their waits end without waiting out the timeout.
#include <catch2/catch.hpp>

#include <random>

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
  bool lossless() const { return false; }
  bool summable() const { return false; }
  bool needs_residual() const { return false; }
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

/// Trains until something throws; returns the message (empty if nothing did).
std::string train_until_failure(Sync& sync, int rank) {
  std::vector<std::vector<float>> g(kLayout.num_layers());
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
        Sync sync(t, kLayout, Options{.timeout = 60s},
                  {.slicing = {.max_elements = 5000}, .codec = mine, .collective = collective::AnyCollective::parse(collective)});
        return train_until_failure(sync, r);
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
    AnySynchronizer sync(t, kLayout, {"fixed:5000", "forward", "fp32", "ring"}, Options{.timeout = 60s});
    std::vector<std::vector<float>> g(kLayout.num_layers());
    try {
      for (int it = 0; it < 20; ++it) {
        for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);
        if (it == 3 && r == 2) {
          sync.abort("loss is nan at iteration 3");
          return "aborted";
        }
        for (std::size_t l = g.size(); l-- > 0;) {
          g[l].assign(kLayout.layer(l).elements, 1.0f);
          sync.gradient_ready(l, g[l]);
        }
        sync.finish_iteration();
      }
    } catch (const std::exception& e) {
      return e.what();
    }
    return "finished";
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
  group.rank(0).send(1, transport::abort_tag, stale);
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
