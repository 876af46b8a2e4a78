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

TEST_CASE("AnyCollective answers with the chosen collective's declared traits") {
  using collective::AnyCollective;
  for (const char* through : {"ring", "ps", "reduce-broadcast", "hierarchical:2", "hybrid"}) {
    INFO(through);
    const collective::Traits t = AnyCollective::parse(through).traits();
    CHECK(t.through_codec);
    CHECK_FALSE(t.needs_lossless_codec);
    CHECK_FALSE(t.holds_back);
    CHECK_FALSE(t.device_memory);
  }
  const collective::Traits dgt = AnyCollective::parse("dgt").traits();
  CHECK(dgt.needs_lossless_codec);
  CHECK(dgt.holds_back);
  CHECK_FALSE(dgt.through_codec);
  CHECK(dgt.lossless_because == "sends its blocks as raw fp32");
  static_assert(collective::static_traits<collective::Ring>->through_codec);
  static_assert(!collective::static_traits<AnyCollective>.has_value(), "known only at run time");
  REQUIRE_THROWS_WITH(collective::check_accepts(AnyCollective::parse("dgt"), codec::AnyCodec::parse("qsgd8")),
                      Catch::Contains("collective 'dgt' sends its blocks as raw fp32 and needs a lossless codec"));
  collective::check_accepts(AnyCollective::parse("dgt"), codec::AnyCodec::parse("fp32"));
  collective::check_accepts(AnyCollective::parse("ring"), codec::AnyCodec::parse("qsgd8"));
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
