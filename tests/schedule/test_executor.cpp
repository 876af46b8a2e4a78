// schedule::Executors on their own (no Synchronizer): every rank takes rank 0's decisions in one
// order, runs each unit's collective and writes the aggregate back into the caller's spans (fused
// units gathered and scattered); a collective's error ends its executor with that error and leaves
// nothing marked done; a rank out of step with rank 0 is named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <gradsync/codec/identity.hpp>
#include <gradsync/collective/ring.hpp>
#include <gradsync/priority/forward_order.hpp>
#include <gradsync/schedule/control.hpp>
#include <gradsync/schedule/executor.hpp>
#include <gradsync/schedule/leader.hpp>
#include <gradsync/schedule/units.hpp>
#include <gradsync/slicing/fusion.hpp>

#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;

namespace {
/// The Ring, recording each unit's schedule position as it starts, and failing unit `fail_unit`
/// on rank `fail_rank` with a WireError.
struct Recording {
  struct Log {
    std::mutex mutex;
    std::map<std::uint64_t, std::uint32_t> unit_at;  // sequence -> unit
  };
  std::shared_ptr<Log> log = std::make_shared<Log>();
  int fail_rank = -1;
  std::uint32_t fail_unit = 0;

  static constexpr collective::Traits traits() { return collective::Ring::traits(); }
  std::string_view name() const { return "recording"; }
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, collective::Job& job, collective::Workspace& ws) const {
    {
      std::lock_guard lock(log->mutex);
      log->unit_at.emplace(job.sequence.value(), job.tag);
    }
    if (t.rank() == fail_rank && job.tag == fail_unit) throw WireError("injected failure of unit " + std::to_string(job.tag));
    return collective::Ring{}.run(t, codec, job, ws);
  }
};

/// What a Synchronizer holds around its executors, reduced to what they need; threads started by
/// start(), stopped and joined by the destructor.
struct Engine {
  using Executors = schedule::Executors<priority::ForwardOrder, codec::Identity, Recording>;

  Engine(transport::Transport& t, const ModelLayout& layout, Options options, Recording collective)
      : layout(layout), options(settled(std::move(options), t.size())), collective(std::move(collective)),
        table(layout, slicing.plan(layout), 0, false, slicing.describe()),
        leader(t, control, this->options, capacities(layout), table),
        state(collective::start(this->collective, {.transport = t})),
        executors({t, priority, codec, this->collective, *state, layout, table, leader, control, stats, this->options}) {}
  ~Engine() {
    control.stop();
    leader.stop();
    for (auto& th : threads) th.join();
  }
  void start() {
    for (std::size_t i = 0; i < executors.size(); ++i)
      threads.emplace_back([this, i] {
        try {
          executors.run(executors.slot(i));
        } catch (...) {
          control.fail(std::current_exception());
        }
      });
  }
  /// gradient_ready's part: the table's hand-over, the ready units reported to the leader.
  void hand_over(std::size_t layer, std::span<float> grad, std::int64_t iteration) {
    leader.ready(
        iteration, [&](std::uint32_t u) { return priority.key(table.unit(u)); },
        [&](const auto& ready) { table.hand_over(layer, grad, iteration, ready); });
  }
  /// True once every layer is done; false if the executors failed or it took 60 s.
  bool wait_done() { return control.wait_for(60s, [&] { return table.all_done(); }); }
  std::vector<std::size_t> capacities(const ModelLayout& layout) const {
    std::vector<std::size_t> cap(priority.levels(layout), 0);
    for (const Unit& u : slicing.plan(layout)) ++cap[priority.key(u)];
    return cap;
  }

  const ModelLayout& layout;
  Options options;
  Recording collective;
  slicing::SliceAndFuse slicing{.slice_elements = 100};  // slices of the large layers, small ones fused
  priority::ForwardOrder priority;
  codec::Identity codec;
  schedule::Control control;
  StatisticsRecorder stats;
  schedule::UnitTable table;
  schedule::Leader leader;
  std::unique_ptr<collective::Runtime> state;  // Recording keeps none
  Executors executors;
  std::vector<std::thread> threads;
};

/// Integer-valued gradients: their sums are exact in any order, so the reference is equality.
float value(int rank, std::size_t layer, int iteration, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(layer) * 100 + iteration * 10 + static_cast<int>(i % 7));
}

const ModelLayout kLayout = testing::uneven_layout();
constexpr int kRanks = 3;
}  // namespace

TEST_CASE("executors run every unit in rank 0's order on every rank and write the sums back") {
  const auto plan = slicing::SliceAndFuse{.slice_elements = 100}.plan(kLayout);
  REQUIRE(std::ranges::any_of(plan, &Unit::fused));  // the test covers gather and scatter
  const std::size_t unit_count = plan.size();
  using Seen = std::pair<bool, std::map<std::uint64_t, std::uint32_t>>;  // {sums right, schedule}
  const auto seen = testing::run_ranks<Seen>(kRanks, [&](int r, transport::Transport& t) {
    std::atomic<int> events{0};
    Recording collective;
    Engine e(t, kLayout, {.average = false, .on_unit = [&](const UnitEvent&) { ++events; }}, collective);
    e.start();
    std::vector<std::vector<float>> g(kLayout.num_layers());
    bool right = true;
    for (int it = 0; it < 2; ++it) {
      for (std::size_t l = g.size(); l-- > 0;) {
        g[l].resize(kLayout.layer(l).elements);
        for (std::size_t i = 0; i < g[l].size(); ++i) g[l][i] = value(r, l, it, i);
        e.hand_over(l, g[l], it);
      }
      if (!e.wait_done()) return Seen{};
      for (std::size_t l = 0; l < g.size(); ++l)
        for (std::size_t i = 0; i < g[l].size(); ++i) {
          float want = 0;
          for (int q = 0; q < kRanks; ++q) want += value(q, l, it, i);
          right = right && g[l][i] == want;
        }
    }
    right = right && events.load() == static_cast<int>(2 * unit_count) && e.stats.snapshot().units == 2 * unit_count;
    std::lock_guard lock(collective.log->mutex);
    return Seen{right, collective.log->unit_at};
  });
  for (int r = 0; r < kRanks; ++r) {
    CAPTURE(r);
    REQUIRE(seen[r].first);
    // Decisions 0 .. n-1, each run once, the same unit at each position on every rank.
    REQUIRE(seen[r].second.size() == 2 * unit_count);
    REQUIRE(seen[r].second.rbegin()->first == 2 * unit_count - 1);
    REQUIRE(seen[r].second == seen[0].second);
  }
}

TEST_CASE("a collective's error ends its executor with that error, and the unit's layers stay not done") {
  const auto plan = slicing::SliceAndFuse{.slice_elements = 100}.plan(kLayout);
  const std::uint32_t failing = 3;
  const std::uint32_t layer = plan[failing].segments[0].layer;
  struct Seen {
    std::string error;
    bool idle = false, layer_done = true;
  };
  const auto seen = testing::run_ranks<Seen>(
      kRanks,
      [&](int, transport::Transport& t) {
        Seen s;
        {
          Engine e(t, kLayout, {.average = false}, Recording{.fail_rank = 1, .fail_unit = failing});
          e.start();
          std::vector<std::vector<float>> g(kLayout.num_layers());
          for (std::size_t l = g.size(); l-- > 0;) {
            g[l].assign(kLayout.layer(l).elements, 1.0f);
            e.hand_over(l, g[l], 0);
          }
          if (e.wait_done()) return s;
          try {
            e.control.rethrow_if_failed();
          } catch (const std::exception& x) {
            s.error = x.what();
          }
          e.control.settle([&] { return e.executors.idle(); });
          s.idle = e.executors.idle();
          s.layer_done = e.table.layer_done(layer);
        }
        return s;
      },
      2s);  // the other ranks' waits for rank 1 end with the transport's timeout
  REQUIRE(seen[1].error == "injected failure of unit 3");
  REQUIRE(seen[1].idle);
  REQUIRE_FALSE(seen[1].layer_done);
  for (int r : {0, 2}) {  // their part of unit 3 waits for rank 1 and times out: an error, no hang
    CAPTURE(r, seen[r].error);
    REQUIRE_THAT(seen[r].error, Catch::Contains("waited 2000 ms for rank"));
    REQUIRE(seen[r].idle);
    REQUIRE_FALSE(seen[r].layer_done);
  }
}

TEST_CASE("a rank whose units are of another iteration than rank 0 decided is told so") {
  const auto seen = testing::run_ranks<std::string>(
      2,
      [&](int r, transport::Transport& t) -> std::string {
        Engine e(t, kLayout, {}, Recording{});
        e.start();
        std::vector<std::vector<float>> g(kLayout.num_layers());
        for (std::size_t l = g.size(); l-- > 0;) {
          g[l].assign(kLayout.layer(l).elements, 1.0f);
          e.hand_over(l, g[l], r == 0 ? 0 : 1);  // rank 1 skipped an iteration
        }
        if (e.wait_done()) return "done";
        try {
          e.control.rethrow_if_failed();
        } catch (const std::exception& x) {
          return x.what();
        }
        return "stopped without an error";
      },
      2s);
  REQUIRE_THAT(seen[1], Catch::Contains("is at iteration 1 for unit") &&
                            Catch::Contains("but rank 0 scheduled iteration 0: ranks must call finish_iteration() in step"));
  REQUIRE_THAT(seen[0], Catch::Contains("waited 2000 ms for rank 1"));
}
