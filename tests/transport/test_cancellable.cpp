// transport::Cancellable: its own timeout replaces the wrapped transport's, cancel() ends waits in
// progress and to come with the reason given, and waits() names the peers waited for while (and
// only while) a receive or send is in progress. No upper bound on a duration here is tighter than
// half the timeout it distinguishes from (loaded machines wake threads late).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <gradsync/transport/cancellable.hpp>
#include <gradsync/transport/in_process.hpp>

#include "support/rendezvous.hpp"

using namespace gradsync;
using namespace std::chrono_literals;
using transport::Cancellable;

namespace {
using clock_type = std::chrono::steady_clock;
constexpr transport::Tag kTag = 5;

/// The peers `c` lists as waited for now, in rank order.
std::vector<int> waited_for(const Cancellable& c) {
  std::vector<int> peers;
  c.waits([&](const transport::Wait& w) { peers.push_back(w.peer); });
  std::ranges::sort(peers);
  return peers;
}
/// Polls until `c` lists exactly `peers` (in rank order) (false after 30 s: the test fails, it does not hang).
bool lists_soon(const Cancellable& c, const std::vector<int>& peers) {
  for (const auto end = clock_type::now() + 30s; clock_type::now() < end; std::this_thread::sleep_for(1ms))
    if (waited_for(c) == peers) return true;
  return false;
}
}  // namespace

TEST_CASE("a silent peer times out after the Cancellable's timeout, not the wrapped transport's") {
  transport::InProcessGroup group(2, 120s);
  Cancellable c(group.rank(0), 200ms);
  REQUIRE(c.timeout() == 200ms);
  std::array<std::byte, 8> buffer;
  const auto t0 = clock_type::now();
  try {
    c.recv(1, kTag, buffer);
    FAIL("recv returned without a message");
  } catch (const PeerTimeout& e) {
    REQUIRE(e.peer == 1);
    REQUIRE_THAT(e.what(), Catch::Contains("waited 200 ms for rank 1 (tag 5)"));
  }
  const auto took = clock_type::now() - t0;
  REQUIRE(took >= 200ms);
  REQUIRE(took < 60s);  // the wrapped transport would have waited 120 s
  REQUIRE(waited_for(c).empty());
}

TEST_CASE("messages pass through, and recv_for gives up after its own wait") {
  transport::InProcessGroup group(2);
  Cancellable c(group.rank(0), 60s);
  const std::vector<int> sent{1, 2, 3};
  group.rank(1).send(0, kTag, std::as_bytes(std::span(sent)));
  std::vector<int> got(3);
  REQUIRE(c.recv(1, kTag, std::as_writable_bytes(std::span(got))) == 3 * sizeof(int));
  REQUIRE(got == sent);
  REQUIRE_FALSE(c.recv_for(1, kTag, std::as_writable_bytes(std::span(got)), 50ms));
  REQUIRE_FALSE(c.try_recv(1, kTag, std::as_writable_bytes(std::span(got))));
  c.send(1, kTag, std::as_bytes(std::span(sent)));
  REQUIRE(group.rank(1).recv(0, kTag, std::as_writable_bytes(std::span(got))) == 3 * sizeof(int));
  REQUIRE(c.wrapped() == &group.rank(0));
  REQUIRE_THROWS_AS(Cancellable(group.rank(0), 0ms), UsageError);
}

TEST_CASE("cancel ends a wait in progress with its reason, and every wait after it, and the first reason stays") {
  transport::InProcessGroup group(2, 60s);
  Cancellable c(group.rank(0), 60s);
  auto waiting = std::async(std::launch::async, [&] {
    std::array<std::byte, 8> buffer;
    c.recv(1, kTag, buffer);
  });
  REQUIRE(lists_soon(c, {1}));  // the receive is in progress
  REQUIRE_FALSE(c.cancelled());
  const auto t0 = clock_type::now();
  c.cancel(std::make_exception_ptr(PeerError("rank 1 failed: disk full")));
  c.cancel(std::make_exception_ptr(PeerError("a later reason")));
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);  // the timeout is 60 s
  REQUIRE(clock_type::now() - t0 < 30s);
  REQUIRE_THROWS_WITH(waiting.get(), "rank 1 failed: disk full");
  REQUIRE(c.cancelled());
  REQUIRE(waited_for(c).empty());
  std::array<std::byte, 8> buffer;
  REQUIRE_THROWS_WITH(c.recv(1, kTag, buffer), "rank 1 failed: disk full");
  REQUIRE_THROWS_WITH(c.try_recv(1, kTag, buffer), "rank 1 failed: disk full");
  REQUIRE_THROWS_WITH(c.send(1, kTag, buffer), "rank 1 failed: disk full");
  REQUIRE_THROWS_WITH(c.send_async(1, kTag, buffer), "rank 1 failed: disk full");
}

TEST_CASE("waits lists every receive in progress with its peer and start, and forgets it when it ends") {
  transport::InProcessGroup group(3, 60s);
  Cancellable c(group.rank(0), 60s);
  const auto before = clock_type::now();
  std::vector<std::future<std::size_t>> receives;
  for (int peer : {1, 2})
    receives.push_back(std::async(std::launch::async, [&c, peer] {
      std::array<std::byte, 8> buffer;
      return c.recv(peer, kTag, buffer);
    }));
  // The receives end only with their messages: send both before any REQUIRE can end the test.
  const bool both = lists_soon(c, {1, 2});
  c.waits([&](const transport::Wait& w) { CHECK((w.since >= before && w.since <= clock_type::now())); });
  const std::array<std::byte, 4> message{};
  group.rank(2).send(0, kTag, message);
  const std::size_t from_2 = receives[1].get();
  const bool only_1 = lists_soon(c, {1});
  group.rank(1).send(0, kTag, message);
  REQUIRE(receives[0].get() == 4);
  REQUIRE(both);
  REQUIRE(from_2 == 4);
  REQUIRE(only_1);
  REQUIRE(waited_for(c).empty());
}

TEST_CASE("a send nobody takes times out naming its peer, and is listed while it waits") {
  testing::RendezvousGroup group(2, 600s);  // send_async completes only when the peer receives
  Cancellable c(group.rank(0), 300ms);
  const std::array<std::byte, 16> data{};
  const auto id = c.send_async(1, kTag, data);
  REQUIRE(id != 0);
  auto waiting = std::async(std::launch::async, [&] { c.wait_sent(id); });
  REQUIRE(lists_soon(c, {1}));
  try {
    waiting.get();
    FAIL("wait_sent returned though nobody received");
  } catch (const PeerTimeout& e) {
    REQUIRE(e.peer == 1);
    REQUIRE_THAT(e.what(), Catch::Contains("waited 300 ms for rank 1 to take a message (tag 5)"));
  }
  REQUIRE(waited_for(c).empty());
  // Taken (after the first, still queued): the next send completes.
  const auto next = c.send_async(1, kTag, data);
  std::array<std::byte, 16> got;
  REQUIRE(group.rank(1).recv(0, kTag, got) == 16);
  REQUIRE(group.rank(1).recv(0, kTag, got) == 16);
  c.wait_sent(next);
}
