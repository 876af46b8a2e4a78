// Throttled<>: link strings, bandwidth and latency really enforced, and aggregation unchanged.
#include <catch2/catch.hpp>

#include <thread>

#include <gradsync/transport/throttled.hpp>

#include "support/reference.hpp"

using namespace gradsync;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using testing::Aggregates;

TEST_CASE("link strings: gbit, mbit, latency - bad ones name the format") {
  using transport::Link;
  REQUIRE(Link::parse("1gbit").gbit == 1.0);
  REQUIRE(Link::parse("10gbit").gbit == 10.0);
  REQUIRE(Link::parse("500mbit").gbit == Approx(0.5));
  REQUIRE(Link::parse("2.5gbit").gbit == 2.5);
  REQUIRE(Link::parse("1gbit+50us").latency == 50us);
  REQUIRE(Link::parse("1gbit+2ms").latency == 2000us);
  REQUIRE_FALSE(Link::parse("1gbit").shared_nic);
  REQUIRE(Link::parse("1gbit+2ms/nic").shared_nic);
  REQUIRE(Link::parse("10gbit/nic").gbit == 10.0);
  for (const char* bad : {"", "1", "gbit", "-1gbit", "0mbit", "1gb", "1gbit+", "1gbit+5s", "xgbit", "1gbit/nix", "/nic"})
    REQUIRE_THROWS_WITH(Link::parse(bad), Catch::Contains("gbit or <rate>mbit"));
}

TEST_CASE("a throttled link carries bytes at its rate, plus its latency") {
  transport::InProcessGroup group(2);
  transport::Throttled<> a(group.rank(0), transport::Link::parse("100mbit+20ms"));  // 12.5 MB/s
  transport::Throttled<> b(group.rank(1), transport::Link::parse("100mbit+20ms"));
  std::vector<std::byte> big(1'250'000), out(big.size());
  const auto t0 = clock_type::now();
  std::thread sender([&] { a.send(1, 5, big); });
  REQUIRE(b.recv(0, 5, out) == big.size());
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  sender.join();
  // 1.25 MB at 12.5 MB/s = 0.1 s (less the 64 KiB burst), + 20 ms latency
  REQUIRE(seconds > 0.09 + 0.02 - 0.006);
  REQUIRE(seconds < 0.5);

  const auto t1 = clock_type::now();  // a tiny message pays the latency only
  a.send(1, 6, std::span(big).first(1));
  REQUIRE(b.recv(0, 6, out) == 1);
  REQUIRE(clock_type::now() - t1 >= 20ms);

  // The network changes under the job (gradsync-train --bandwidth-change): the rate and the
  // latency of what is sent from then on.
  a.change(transport::Link::parse("1gbit+60ms"));
  const auto t2 = clock_type::now();
  a.send(1, 7, std::span(big).first(1));
  REQUIRE(b.recv(0, 7, out) == 1);
  REQUIRE(clock_type::now() - t2 >= 60ms);
  std::vector<std::byte> huge(12'500'000), huge_out(huge.size());
  const auto t3 = clock_type::now();
  std::thread again([&] { a.send(1, 8, huge); });
  REQUIRE(b.recv(0, 8, huge_out) == huge.size());
  again.join();
  // 0.1 s at 1 Gbit/s, not 1 s at 100 Mbit/s: a margin a loaded machine does not eat
  REQUIRE(clock_type::now() - t3 < 60ms + 600ms);
  REQUIRE_THROWS_AS(a.change(transport::Link{.gbit = 0}), UsageError);
}

TEST_CASE("try_recv: a message counts as arrived only at its stamped time, and polling never sleeps") {
  transport::InProcessGroup group(2);
  transport::Throttled<> a(group.rank(0), transport::Link::parse("100mbit+30ms"));
  transport::Throttled<> b(group.rank(1), transport::Link::parse("100mbit+30ms"));
  std::vector<std::byte> msg(1000, std::byte{7}), out(msg.size());
  const auto t0 = clock_type::now();
  a.send(1, 4, msg);
  a.send(1, 5, std::span(msg).first(10));
  REQUIRE_FALSE(b.try_recv(0, 4, out));  // in the inner transport already, but still on the wire
  REQUIRE_FALSE(b.try_recv(0, 4, out));  // its stamp is held, not lost
  REQUIRE(clock_type::now() - t0 < 20ms);
  std::optional<std::size_t> got;
  while (!(got = b.try_recv(0, 4, out))) std::this_thread::sleep_for(1ms);
  REQUIRE(clock_type::now() - t0 >= 30ms);
  REQUIRE(*got == msg.size());
  REQUIRE(out == msg);
  REQUIRE(b.recv(0, 5, out) == 10);  // other tags are untouched by the held stamp
}

TEST_CASE("links are per peer by default, one shared bucket per rank with /nic") {
  auto two_sends = [](const char* link) {  // rank 0 sends 1.25 MB to each of ranks 1 and 2
    transport::InProcessGroup group(3);
    std::vector<std::unique_ptr<transport::Throttled<>>> t;
    for (int r = 0; r < 3; ++r) t.push_back(std::make_unique<transport::Throttled<>>(group.rank(r), transport::Link::parse(link)));
    std::vector<std::byte> big(1'250'000), out(big.size());
    const auto t0 = clock_type::now();
    t[0]->send(1, 1, big);
    t[0]->send(2, 1, big);
    t[1]->recv(0, 1, out);
    t[2]->recv(0, 1, out);
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  REQUIRE(two_sends("100mbit") < 0.16);      // 0.1 s each, in parallel
  REQUIRE(two_sends("100mbit/nic") > 0.18);  // 0.2 s: one after the other
}

TEST_CASE("a throttled transport still gives the reference mean") {
  const std::string collective = GENERATE("ring", "reduce-broadcast", "hierarchical:2");
  const int ranks = 3;
  const PolicyNames names{"fixed:1000", "forward", "fp32", collective};
  transport::InProcessGroup group(ranks);
  std::vector<Aggregates> got(ranks);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        transport::Throttled<> t(group.rank(r), transport::Link::parse("2gbit+100us"));
        got[r] = testing::train(r, t, names, true);
      });
  }
  testing::require_reference(got[0], ranks, true);
  for (int r = 1; r < ranks; ++r) REQUIRE(testing::bit_identical(got[0], got[r]));
}

TEST_CASE("an unthrottled peer is detected") {
  transport::InProcessGroup group(2);
  transport::Throttled<> b(group.rank(1), transport::Link::parse("1gbit"));
  std::byte one{1};
  group.rank(0).send(1, 3, std::span(&one, 1));
  std::vector<std::byte> out(8);
  REQUIRE_THROWS_WITH(b.recv(0, 3, out), Catch::Contains("wrap every rank's transport in Throttled"));
}
