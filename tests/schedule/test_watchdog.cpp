// schedule::Watchdog: whom a timed-out rank blames. The race to get right: in a ring, when rank 2
// dies, rank 0 times out waiting for rank 2 and rank 1 for rank 0, at about the same moment and
// in either order; a survivor may even decide and leave before the other times out. Each must
// name rank 2, within Options::timeout + grace + 2 slices of the start of its wait.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <string>
#include <thread>

#include <gradsync/schedule/control.hpp>
#include <gradsync/schedule/watchdog.hpp>
#include <gradsync/transport/cancellable.hpp>

#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;
using schedule::Watchdog;
using Blame = schedule::detail::Blame;

namespace {
constexpr auto kTimeout = 200ms;
constexpr std::uint64_t kSession = 42;
constexpr transport::Tag kTag = 7;

/// Loaded machines and sanitizers wake threads late: what a test allows on top of the bound.
constexpr auto kSlack = 500ms;
constexpr auto bound() { return kTimeout + Watchdog::grace(kTimeout) + 2 * Watchdog::slice; }

/// What one rank of a test saw: its error, and how long after the start of its wait it came.
struct Seen {
  std::string error;
  std::chrono::steady_clock::duration took{};
};

/// A survivor: after `delay`, waits `kTimeout` for a message of rank `from` that never comes,
/// reports the timeout to its watchdog as a synchronizer's thread would, and returns the error
/// the synchronizer fails with. Returning destroys its watchdog: the rank leaves at once.
Seen survivor(transport::Transport& t, int from, std::chrono::milliseconds delay) {
  schedule::Control control;
  transport::Cancellable c(t, kTimeout);
  Watchdog dog({t, c, control}, kSession, kTimeout);
  dog.start();
  std::this_thread::sleep_for(delay);
  const auto t0 = std::chrono::steady_clock::now();
  if (!control.stopping()) {  // (a peer's verdict may have come first)
    try {
      std::array<std::byte, 8> buffer;
      c.recv(from, kTag, buffer);
    } catch (...) {
      dog.fail(std::current_exception());
    }
  }
  control.wait([] { return false; });  // until the watchdog fails the rank
  Seen seen{"no error", std::chrono::steady_clock::now() - t0};
  try {
    control.rethrow_if_failed();
  } catch (const std::exception& e) {
    seen.error = e.what();
  }
  return seen;
}
}  // namespace

TEST_CASE("blame follows the waits to the rank that does not answer", "[watchdog]") {
  using Answers = std::vector<std::optional<std::vector<int>>>;
  SECTION("a chain: rank 1 waits for 0, 0 for 2, 2 is silent") {
    const Blame b = schedule::detail::blame(1, {0}, Answers{std::vector<int>{2}, {}, std::nullopt});
    REQUIRE(b.kind == Blame::Kind::silent);
    REQUIRE(b.ranks == std::vector<int>{2});
    REQUIRE(b.waiters == std::vector<int>{0});
  }
  SECTION("a chain broken by a rank asked between two waits still names the silent rank") {
    const Blame b = schedule::detail::blame(1, {0}, Answers{std::vector<int>{}, {}, std::nullopt});
    REQUIRE(b.kind == Blame::Kind::silent);
    REQUIRE(b.ranks == std::vector<int>{2});
    REQUIRE(b.waiters.empty());
  }
  SECTION("of two silent ranks, the one the waits lead to") {
    const Blame b = schedule::detail::blame(0, {1}, Answers{{}, std::vector<int>{3}, std::nullopt, std::nullopt});
    REQUIRE(b.ranks == std::vector<int>{3});
    REQUIRE(b.waiters == std::vector<int>{1});
  }
  SECTION("a rank cut off from everyone names whom it waits for") {
    const Blame b = schedule::detail::blame(1, {0}, Answers{std::nullopt, {}, std::nullopt});
    REQUIRE(b.ranks == std::vector<int>{0});
    REQUIRE(b.waiters == std::vector<int>{1});
  }
  SECTION("everyone answers: the rank at the end of the chain, which waits for nobody") {
    const Blame b = schedule::detail::blame(1, {0}, Answers{std::vector<int>{2}, {}, std::vector<int>{}});
    REQUIRE(b.kind == Blame::Kind::idle);
    REQUIRE(b.ranks == std::vector<int>{2});
    REQUIRE(b.waiters == std::vector<int>{0});
  }
  SECTION("a loop of waits blames nobody") {
    const Blame b = schedule::detail::blame(0, {1}, Answers{{}, std::vector<int>{0}});
    REQUIRE(b.kind == Blame::Kind::none);
  }
  SECTION("out-of-range ranks in an answer are ignored") {
    const Blame b = schedule::detail::blame(0, {1}, Answers{{}, std::vector<int>{-1, 7, 2}, std::vector<int>{}});
    REQUIRE(b.kind == Blame::Kind::idle);
    REQUIRE(b.ranks == std::vector<int>{2});
  }
}

TEST_CASE("two survivors that time out at any moments apart each name the dead rank", "[watchdog]") {
  // Rank 1's wait starts `apart` after rank 0's (before it, if negative): the same moment, within
  // a poll, within the grace, just after the other decided, after the other left.
  const auto grace = Watchdog::grace(kTimeout);
  const std::chrono::milliseconds apart = GENERATE_COPY(0ms, 1ms, -1ms, Watchdog::slice, -Watchdog::slice, grace / 2,
                                                        -grace / 2, grace, -grace, kTimeout + grace + 100ms,
                                                        -(kTimeout + grace + 100ms), 2 * (kTimeout + grace));
  CAPTURE(apart.count());
  const auto base = std::max(0ms, -apart);
  const auto seen = testing::run_ranks<Seen>(3, [&](int r, transport::Transport& t) -> Seen {
    if (r == 2) return {};  // dead from the start: sends nothing, answers nothing
    return survivor(t, r == 0 ? 2 : 0, r == 0 ? base : base + apart);
  });
  for (int r : {0, 1}) {
    CAPTURE(r, seen[r].error);
    REQUIRE_THAT(seen[r].error, Catch::Contains("rank 2 stopped answering") && Catch::Contains("died or its network is down"));
    REQUIRE(seen[r].took <= bound() + kSlack);
  }
}

TEST_CASE("a rank that answers but waits for nobody is named alive, not dead", "[watchdog]") {
  const auto seen = testing::run_ranks<Seen>(2, [&](int r, transport::Transport& t) -> Seen {
    if (r == 0) return survivor(t, 1, 0ms);
    schedule::Control control;  // rank 1: its watchdog runs, but it never sends rank 0 anything
    transport::Cancellable c(t, kTimeout);
    Watchdog dog({t, c, control}, kSession, kTimeout);
    dog.start();
    control.wait([] { return false; });  // until rank 0's verdict comes
    try {
      control.rethrow_if_failed();
    } catch (const std::exception& e) {
      return {e.what()};
    }
    return {};
  });
  for (int r : {0, 1}) {
    CAPTURE(r, seen[r].error);
    REQUIRE_THAT(seen[r].error, Catch::Contains("waited 200 ms for rank 1, which answers but waits for no peer"));
  }
  REQUIRE(seen[0].took <= bound() + kSlack);
}

TEST_CASE("the caller's wait fails after the timeout, within the bound", "[watchdog]") {
  transport::InProcessGroup group(1);
  schedule::Control control;
  transport::Cancellable c(group.rank(0), kTimeout);
  Watchdog dog({group.rank(0), c, control}, kSession, kTimeout);
  dog.start();
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_FALSE(dog.wait([] { return false; }, "wait_for", 3));
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(took >= kTimeout);
  REQUIRE(took <= bound() + kSlack);
  REQUIRE_THROWS_WITH(control.rethrow_if_failed(), Catch::Contains("wait_for(3): not aggregated after 200 ms"));
}

TEST_CASE("a rank's own error reaches its peers at once, as its failure", "[watchdog]") {
  const auto seen = testing::run_ranks<std::string>(3, [&](int r, transport::Transport& t) -> std::string {
    schedule::Control control;
    transport::Cancellable c(t, 60s);
    Watchdog dog({t, c, control}, kSession, 60s);
    dog.start();
    if (r == 1) dog.fail(std::make_exception_ptr(std::runtime_error("disk full")));
    if (!control.wait_for(10s, [] { return false; }) && control.failed()) try {
        control.rethrow_if_failed();
      } catch (const std::exception& e) {
        return e.what();
      }
    return "no error";
  });
  REQUIRE(seen[1] == "disk full");
  for (int r : {0, 2}) REQUIRE(seen[r] == "gradsync: rank 1 failed: disk full");
}
