// schedule::handshake: whole texts compared, one verdict on every rank, one session.
#include <catch2/catch.hpp>

#include <gradsync/schedule/handshake.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

namespace {
/// Runs the handshake on 3 ranks with `agreed(r)`; each rank's session, or its error's text.
std::vector<std::string> shake(const std::function<std::string(int)>& agreed) {
  return testing::run_ranks<std::string>(3, [&](int r, transport::Transport& t) -> std::string {
    try {
      return std::to_string(schedule::handshake(t, {7, 3, 2, agreed(r)}));
    } catch (const std::exception& e) {
      return e.what();
    }
  });
}
}  // namespace

TEST_CASE("ranks that agree get the same session") {
  const auto got = shake([](int) { return std::string(5000, 'x') + "/seed=1"; });
  REQUIRE(got[0] == got[1]);
  REQUIRE(got[1] == got[2]);
  REQUIRE(got[0].find("disagree") == std::string::npos);
}

TEST_CASE("a difference at the end of a long text fails every rank, with both texts whole") {
  const std::string common = std::string(5000, 'x') + "/codec:bucket=";
  const auto got = shake([&](int r) { return common + (r == 1 ? "1024" : "512"); });
  for (const auto& e : got) REQUIRE(e == got[0]);
  REQUIRE_THAT(got[0], Catch::Contains("rank 1 uses policies '" + common + "1024' but rank 0 uses '" + common + "512'") &&
                           Catch::Contains("they differ in 'codec:bucket=1024' vs 'codec:bucket=512'"));
}

TEST_CASE("a description longer than the handshake takes is refused, naming the limit") {
  transport::InProcessGroup g(1);
  REQUIRE_THROWS_WITH(schedule::handshake(g.rank(0), {7, 1, 2, std::string(schedule::max_agreed_text + 1, 'x')}),
                      Catch::Contains("16384"));
}
