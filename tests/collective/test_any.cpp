// collective/any.hpp: runtime collectives from a string, and the knobs in the handshake.
#include <catch2/catch.hpp>

#include <gradsync/any_synchronizer.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

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
#if !defined(GRADSYNC_WITH_GLOO)  // this program does not link gradsync::gloo (test_gloo does)
  REQUIRE_THROWS_WITH(AnyCollective::parse("gloo:eth0"), Catch::Contains("install libgloo-dev"));
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
