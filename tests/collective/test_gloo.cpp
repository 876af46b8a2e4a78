// collective::GlooNative ("gloo"): Gloo's ring all-reduce over pairs bootstrapped through the
// synchronizer's transport, here in-process ranks on the loopback interface.
#include <catch2/catch.hpp>

#include <gradsync/gradsync.hpp>

#include "support/reference.hpp"

using namespace gradsync;
using testing::Aggregates;

TEST_CASE("collective 'gloo' gives the reference mean on 1-4 ranks, bit-identical on every rank") {
  const int ranks = GENERATE(1, 2, 3, 4);
  const unsigned inflight = GENERATE(1u, 4u);  // 4: units of one rank run in Gloo at once
  for (const char* slicing : {"whole", "fixed:1000"}) {
    const PolicyNames names{slicing, "forward", "fp32", "gloo:lo"};
    CAPTURE(ranks, inflight, slicing);
    const auto got = testing::run_ranks<Aggregates>(ranks, [&](int r, transport::Transport& t) {
      return testing::train(r, t, names, true, {.inflight_units = inflight});
    });
    testing::require_reference(got[0], ranks, true);
    for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
  }
}

TEST_CASE("collective 'gloo' gives the sum by option") {
  const auto got = testing::run_ranks<Aggregates>(3, [&](int r, transport::Transport& t) {
    return testing::train(r, t, {"fixed:1000", "forward", "fp32", "gloo:lo"}, false);
  });
  testing::require_reference(got[0], 3, false);
}

TEST_CASE("collective 'gloo' refuses a compressing codec, and a unit without its state") {
  transport::InProcessGroup group(2);
  CHECK_THROWS_WITH(AnySynchronizer(group.rank(0), testing::uneven_layout(), {"fixed:1000", "forward", "qsgd8", "gloo"}),
                    Catch::Contains("needs a lossless codec"));
  std::vector<float> data(8, 1.0f);
  collective::Job job{.data = data};
  collective::Workspace ws;
  static_assert(!collective::RunsAlone<collective::GlooNative>, "Gloo's pairs are its state: no run without them");
  static_assert(collective::RunsAlone<collective::Ring>);
  CHECK_THROWS_WITH(collective::AnyCollective::parse("gloo").run(group.rank(0), codec::Identity{}, job, ws),
                    Catch::Contains("collective 'gloo' runs a unit with the state its start() made"));
}

TEST_CASE("collective 'gloo' names an interface it cannot use") {
  transport::InProcessGroup group(2, std::chrono::milliseconds(2000));
  collective::GlooNative gloo("gradsync-no-such-if0");
  const collective::Setup setup{.transport = group.rank(0)};
  CHECK_THROWS_WITH(gloo.start(setup), Catch::Contains("no network interface 'gradsync-no-such-if0'") &&
                                           Catch::Contains("GLOO_SOCKET_IFNAME"));
}

TEST_CASE("collective 'gloo': a rank that stops synchronizing is a PeerError, not a hang") {
  const auto errors = testing::run_ranks<std::string>(
      2,
      [&](int r, transport::Transport& t) -> std::string {
        collective::GlooNative gloo("lo");
        const auto mesh = gloo.start({.transport = t});
        if (r == 1) return "";  // rank 1 connected, then never runs the unit
        std::vector<float> data(1000, 1.0f);
        collective::Job job{.data = data, .tag = 7};
        collective::Workspace ws;
        try {
          gloo.run(t, codec::Identity{}, job, ws, *mesh);
        } catch (const PeerError& e) {
          return e.what();
        }
        return "no error";
      },
      std::chrono::milliseconds(1500));
  CHECK_THAT(errors[0], Catch::Contains("Gloo's all-reduce of unit 7 failed") && Catch::Contains("Options::timeout"));
}

TEST_CASE("collective 'gloo' parses with and without an interface") {
  CHECK(std::get<collective::GlooNative>(collective::AnyCollective::parse("gloo").policy).iface.empty());
  CHECK(std::get<collective::GlooNative>(collective::AnyCollective::parse("gloo:eth0").policy).iface == "eth0");
  CHECK(collective::AnyCollective::parse("gloo:eth0").traits().needs_lossless_codec);
}
