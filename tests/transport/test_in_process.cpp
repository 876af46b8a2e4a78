#include <catch2/catch.hpp>

#include <thread>

#include <gradsync/transport/in_process.hpp>

using namespace gradsync;
using namespace std::chrono_literals;

namespace {
std::span<const std::byte> bytes(const std::vector<int>& v) { return std::as_bytes(std::span(v)); }
}  // namespace

TEST_CASE("in-process messages match by source and tag, FIFO per pair and tag") {
  transport::InProcessGroup g(3);
  g.rank(1).send(0, 7, bytes({1, 2}));
  g.rank(2).send(0, 7, bytes({3}));
  g.rank(1).send(0, 8, bytes({4}));
  g.rank(1).send(0, 7, bytes({5}));
  std::vector<int> buf(4);
  auto out = std::as_writable_bytes(std::span(buf));
  REQUIRE(g.rank(0).recv(2, 7, out) == sizeof(int));
  REQUIRE(buf[0] == 3);
  REQUIRE(g.rank(0).recv(1, 7, out) == 2 * sizeof(int));
  REQUIRE((buf[0] == 1 && buf[1] == 2));
  REQUIRE(g.rank(0).recv(1, 7, out) == sizeof(int));
  REQUIRE(buf[0] == 5);
  REQUIRE(g.rank(0).recv(1, 8, out) == sizeof(int));
  REQUIRE(buf[0] == 4);
}

TEST_CASE("in-process recv waits for a message from another thread") {
  transport::InProcessGroup g(2);
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    g.rank(0).send(1, 3, bytes({42}));
  });
  int v = 0;
  REQUIRE(g.rank(1).recv(0, 3, std::as_writable_bytes(std::span(&v, 1))) == sizeof v);
  REQUIRE(v == 42);
  sender.join();
}

TEST_CASE("a silent peer times out with a PeerError naming it") {
  transport::InProcessGroup g(2, 50ms);
  int v = 0;
  REQUIRE_FALSE(g.rank(1).recv_for(0, 3, std::as_writable_bytes(std::span(&v, 1)), 10ms));
  REQUIRE_THROWS_WITH(g.rank(1).recv(0, 3, std::as_writable_bytes(std::span(&v, 1))),
                      Catch::Contains("rank 0") && Catch::Contains("died"));
}

TEST_CASE("an oversized message is rejected, never written past the buffer") {
  transport::InProcessGroup g(2);
  g.rank(0).send(1, 1, bytes({1, 2, 3}));
  int v[2] = {0, 0};
  REQUIRE_THROWS_AS(g.rank(1).recv(0, 1, std::as_writable_bytes(std::span(v, 1))), WireError);
  REQUIRE(v[1] == 0);
}

TEST_CASE("bad ranks are usage errors") {
  transport::InProcessGroup g(2);
  REQUIRE_THROWS_AS(g.rank(2), UsageError);
  REQUIRE_THROWS_AS(g.rank(0).send(5, 1, {}), UsageError);
  REQUIRE_THROWS_AS(transport::InProcessGroup(0), UsageError);
}
