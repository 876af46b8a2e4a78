// Misuse gets a clear exception naming the problem and the fix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <gradsync/any_synchronizer.hpp>

#include "support/forwarding.hpp"
#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;

namespace {
const ModelLayout kLayout{{"w", 100}, {"b", 10}};

/// Reports one rank fewer than there are: a rank whose job was started with another world size.
class ShrunkTransport final : public testing::Forwarding {
 public:
  using Forwarding::Forwarding;
  int size() const override { return inner_.size() - 1; }
};

/// Calls one span "GPU memory", so the refusals below are tested without a GPU.
class DeviceSpan final : public testing::Forwarding {
 public:
  using Forwarding::Forwarding;
  const void* device = nullptr;
  bool device_memory(const void* p) const override { return p == device; }
};
/// Stands in for the NCCL collectives: declares that it takes units in GPU memory.
struct DeviceRing : collective::Ring {
  static constexpr collective::Traits traits() {
    collective::Traits t = Ring::traits();
    t.device_memory = true;
    return t;
  }
};

/// Runs `make` on 3 ranks and returns each rank's error message ("" when it succeeded).
std::vector<std::string> construct_on_3(const std::function<void(int, transport::Transport&)>& make) {
  return testing::run_ranks<std::string>(3, [&](int r, transport::Transport& t) -> std::string {
    try {
      make(r, t);
      return "";
    } catch (const PeerError& e) {
      return e.what();
    }
  });
}
}  // namespace

TEST_CASE("gradient_ready rejects a span of the wrong size, naming the layer") {
  transport::InProcessGroup g(1);
  AnySynchronizer sync(g.rank(0), kLayout);
  std::vector<float> v(99);
  REQUIRE_THROWS_WITH(sync.gradient_ready(0, v), Catch::Contains("99 elements") && Catch::Contains("'w' has 100"));
}

// The unit is checked on an executor, so the error surfaces at whichever call comes first after
// that: finish_iteration or the wait (every call after a failure rethrows it).
TEST_CASE("a NaN or Inf gradient fails the synchronizer by its next wait, naming the layer and element") {
  transport::InProcessGroup g(1);
  std::vector<float> w(100, 1.0f), b(10, 0.5f);
  const auto iteration = [&](AnySynchronizer& sync) {
    sync.gradient_ready(1, b);
    sync.gradient_ready(0, w);
    sync.finish_iteration();
    sync.wait_all();
  };
  SECTION("a unit of one layer") {
    AnySynchronizer sync(g.rank(0), kLayout);
    w[37] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE_THROWS_WITH(iteration(sync), Catch::Contains("layer 'w' has a non-finite gradient (element 37 is nan)") &&
                                             Catch::Contains("in iteration 0"));
    REQUIRE_THROWS_AS(sync.gradient_ready(1, b), UsageError);  // failed for good: every later call says so
  }
  SECTION("a fused unit: the element of the layer that holds it") {
    AnySynchronizer sync(g.rank(0), kLayout, {.slicing = "fusion"});
    REQUIRE(sync.units().size() == 1);
    b[9] = -std::numeric_limits<float>::infinity();
    REQUIRE_THROWS_WITH(iteration(sync), Catch::Contains("layer 'b' has a non-finite gradient (element 9 is -inf)"));
  }
  SECTION("the check can be turned off for loss scaling, which skips overflowed steps itself") {
    AnySynchronizer unchecked(g.rank(0), kLayout, {}, Options{.check_finite = false});
    b[9] = -std::numeric_limits<float>::infinity();
    REQUIRE_NOTHROW(iteration(unchecked));
    CHECK(b[9] == -std::numeric_limits<float>::infinity());
  }
}

TEST_CASE("a NaN gradient on one rank stops every rank before any of it is sent") {
  const auto seen = testing::run_ranks<std::string>(3, [](int r, transport::Transport& t) -> std::string {
    AnySynchronizer sync(t, kLayout, {}, Options{.timeout = 20s});
    std::vector<float> w(100, 1.0f), b(10, 0.5f);
    if (r == 1) w[5] = std::numeric_limits<float>::quiet_NaN();
    try {
      sync.gradient_ready(1, b);
      sync.gradient_ready(0, w);
      sync.finish_iteration();
      sync.wait_all();
      return "no error";
    } catch (const std::exception& e) {
      // the other ranks' spans keep their own values: nothing of rank 1's reached them
      if (r != 1 && std::ranges::any_of(w, [](float x) { return std::isnan(x); })) return "NaN received";
      return e.what();
    }
  });
  CHECK_THAT(seen[1], Catch::StartsWith("gradsync: layer 'w' has a non-finite gradient (element 5 is nan)"));
  for (int r : {0, 2}) {
    CHECK_THAT(seen[r], Catch::Contains("rank 1") && Catch::Contains("layer 'w' has a non-finite gradient"));
  }
}

TEST_CASE("layer ids out of range are rejected") {
  transport::InProcessGroup g(1);
  AnySynchronizer sync(g.rank(0), kLayout);
  std::vector<float> v(10);
  REQUIRE_THROWS_WITH(sync.gradient_ready(2, v), Catch::Contains("out of range") && Catch::Contains("0..1"));
  REQUIRE_THROWS_AS(sync.wait_for(7), UsageError);
}

TEST_CASE("gradient_ready twice for one layer in one iteration is rejected") {
  transport::InProcessGroup g(1);
  AnySynchronizer sync(g.rank(0), kLayout);
  std::vector<float> w(100), b(10);
  sync.gradient_ready(1, b);
  REQUIRE_THROWS_WITH(sync.gradient_ready(1, b), Catch::Contains("twice") && Catch::Contains("finish_iteration"));
  sync.gradient_ready(0, w);
  sync.finish_iteration();
  sync.gradient_ready(1, b);  // a new iteration: fine again
  sync.gradient_ready(0, w);
  sync.finish_iteration();
  sync.wait_all();
}

TEST_CASE("finish_iteration names the layers that were not handed over") {
  transport::InProcessGroup g(1);
  AnySynchronizer sync(g.rank(0), kLayout);
  std::vector<float> b(10);
  sync.gradient_ready(1, b);
  REQUIRE_THROWS_WITH(sync.finish_iteration(), Catch::Contains("for layer(s) w"));
  sync.wait_all();
}

TEST_CASE("unknown policy strings are configuration errors") {
  transport::InProcessGroup g(1);
  REQUIRE_THROWS_AS(AnySynchronizer(g.rank(0), kLayout, {.collective = "rign"}), ConfigError);
  REQUIRE_THROWS_AS(AnySynchronizer(g.rank(0), kLayout, {.codec = "fp33"}), ConfigError);
}

TEST_CASE("ranks that disagree on the world size all fail with the same message") {
  const auto errors = construct_on_3([](int r, transport::Transport& t) {
    ShrunkTransport shrunk(t);
    AnySynchronizer sync(r == 2 ? static_cast<transport::Transport&>(shrunk) : t, kLayout);
  });
  for (const auto& e : errors) REQUIRE(e == errors[0]);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 2 sees 2 ranks but rank 0 sees 3"));
}

TEST_CASE("a rank with another model fails every rank, naming it") {
  const auto errors = construct_on_3([](int r, transport::Transport& t) {
    AnySynchronizer sync(t, r == 1 ? ModelLayout{{"w", 100}, {"b", 11}} : kLayout);
  });
  for (const auto& e : errors) REQUIRE(e == errors[0]);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 1 has a different model layout"));
}

TEST_CASE("a rank with other policies fails every rank, naming it") {
  const auto errors = construct_on_3([](int r, transport::Transport& t) {
    AnySynchronizer sync(t, kLayout, {.collective = r == 2 ? "ps" : "ring"});
  });
  for (const auto& e : errors) REQUIRE(e == errors[0]);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 2 uses policies") && Catch::Contains("/ps/"));
}

TEST_CASE("ranks that differ only in a codec knob all fail, showing both descriptions whole") {
  // The knob, and where it shows: the bucket, the bypass threshold, and a seed that comes last
  // after a description longer than a fixed-size field would hold.
  const auto [odd, common, both] = GENERATE(table<std::string, std::string, std::string>(
      {{"qsgd8:bucket=1024", "qsgd8", "'qsgd8:bucket=1024' vs 'qsgd8'"},
       {"qsgd4:bypass=0", "qsgd4:bypass=auto", "'qsgd4:bypass=0' vs 'qsgd4'"},
       {"ef+qsgd8:bucket=256:norm=l2", "ef+qsgd8:bucket=256", "'ef+qsgd8:bucket=256:norm=l2' vs 'ef+qsgd8:bucket=256'"}}));
  CAPTURE(odd, common);
  const auto errors = construct_on_3([&](int r, transport::Transport& t) {
    AnySynchronizer sync(t, kLayout, {"fixed:40000", "forward", r == 1 ? odd : common, "hierarchical:3"});
  });
  for (const auto& e : errors) REQUIRE(e == errors[0]);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 1 uses policies 'fixed:40000/forward/" + odd) &&
                              Catch::Contains("they differ in " + both) && Catch::Contains("/seed=0'"));
}

TEST_CASE("ranks that differ only in the seed fail, however long the policies' descriptions") {
  // The seed comes last, after 100 characters and more: past the end of a fixed-size field.
  const auto errors = construct_on_3([&](int r, transport::Transport& t) {
    AnySynchronizer sync(t, kLayout, {"slicefuse:1234567", "forward", "ef+qsgd16:bucket=1024:norm=l2:bypass=12345", "hybrid:262144:2"},
                         Options{.average = false, .inflight_units = 3,
                                 .seed = r == 2 ? 18446744073709551614ull : 18446744073709551615ull});
  });
  for (const auto& e : errors) REQUIRE(e == errors[0]);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 2 uses policies 'slicefuse:1234567/forward/ef+qsgd16:bucket=1024:norm=l2:"
                                          "bypass=12345/hybrid:262144:2/sum/inflight=3/seed=18446744073709551614'") &&
                              Catch::Contains("'seed=18446744073709551614' vs 'seed=18446744073709551615'"));
}

TEST_CASE("units in flight left to the library are its choice for the ranks, as if given") {
  // 3 ranks: 2 (N-1) = 4. A rank that gives 4 agrees with those that leave it; one that gives 2 does not.
  REQUIRE(default_inflight_units(3) == 4);
  const auto agree = construct_on_3([](int r, transport::Transport& t) {
    AnySynchronizer sync(t, kLayout, {}, Options{.inflight_units = r == 1 ? 4u : 0u});
  });
  for (const auto& e : agree) REQUIRE(e.empty());
  const auto errors = construct_on_3([](int r, transport::Transport& t) {
    AnySynchronizer sync(t, kLayout, {}, Options{.inflight_units = r == 2 ? 2u : 0u});
  });
  REQUIRE_THAT(errors[0], Catch::Contains("rank 2 uses policies") && Catch::Contains("'inflight=2' vs 'inflight=4'"));
}

TEST_CASE("a rank that never joins makes the handshake fail within the timeout") {
  transport::InProcessGroup g(2);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(AnySynchronizer(g.rank(0), kLayout, {}, Options{.timeout = 200ms}),
                      Catch::Contains("rank 1") && Catch::Contains("died") && Catch::Contains("Options::timeout"));
  REQUIRE(std::chrono::steady_clock::now() - t0 < 5s);
}

TEST_CASE("a rank that stops handing over gradients makes wait_for fail, not hang") {
  const auto errors = testing::run_ranks<std::string>(
      2,
      [](int r, transport::Transport& t) -> std::string {
        std::vector<float> w(100), b(10);  // declared first: the executors may use them until ~sync
        AnySynchronizer sync(t, kLayout, {}, Options{.timeout = 300ms});
        if (r == 1) return "";  // this rank walks away
        sync.gradient_ready(1, b);
        sync.gradient_ready(0, w);
        sync.finish_iteration();
        try {
          sync.wait_for(0);
        } catch (const PeerError& e) {
          return e.what();
        }
        return "no error";
      },
      300ms);
  REQUIRE_THAT(errors[0], Catch::Contains("rank 1") || Catch::Contains("not aggregated"));
}

TEST_CASE("a gradient in GPU memory is refused, by name, wherever the host would read it") {
  transport::InProcessGroup g(1);
  DeviceSpan t(g.rank(0));
  std::vector<float> w(100, 1.0f);
  t.device = w.data();
  const Options unchecked{.check_finite = false};
  auto refused = [&](auto&& sync) {
    try {
      sync.gradient_ready(0, w);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  using slicing::WholeLayer, priority::ForwardOrder;
  CHECK_THAT(refused(Synchronizer<WholeLayer, ForwardOrder, codec::Identity, collective::Ring>(t, kLayout, unchecked)),
             Catch::Contains("layer 'w' is in GPU memory") && Catch::Contains("collective 'ring' reads units on the host"));
  CHECK_THAT(refused(Synchronizer<WholeLayer, ForwardOrder, codec::Identity, DeviceRing>(t, kLayout)),
             Catch::Contains("check_finite reads it on the host"));
  CHECK_THAT(refused(Synchronizer<WholeLayer, ForwardOrder, codec::OneBit, DeviceRing>(t, kLayout, unchecked)),
             Catch::Contains("codec 'onebit' keeps its error-feedback residual on the host"));
  CHECK_THAT(refused(Synchronizer<slicing::Fusion, ForwardOrder, codec::Identity, DeviceRing>(t, kLayout, unchecked)),
             Catch::Contains("fuses it with other layers"));
  // all conditions met: accepted (a host vector standing in, so the stand-in collective can run)
  Synchronizer<WholeLayer, ForwardOrder, codec::Identity, DeviceRing> ok(t, kLayout, unchecked);
  CHECK(refused(ok).empty());
  std::vector<float> b(10, 1.0f);
  ok.gradient_ready(1, b);
  ok.finish_iteration();
  ok.wait_all();
  CHECK(w == std::vector<float>(100, 1.0f));
}
