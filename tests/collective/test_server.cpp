// collective::Server, the parameter server's own thread: it adds every worker's push in rank order
// whatever the arrival order (bit for bit the plain sum in that order), serves the most urgent of
// the units whose pushes are all in, and fails the units it holds with the error that stopped it
// (a silent worker, a bad push, stop()) while a unit's own serve() error fails that unit alone.
// Then ParameterServer with its server thread started, against the plain sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include <gradsync/collective/parameter_server.hpp>
#include <gradsync/transport/in_process.hpp>

#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;
using collective::Served;
using collective::Server;

namespace {
/// Polls `done` every millisecond; false after 30 s (the test fails instead of hanging).
template <class F>
bool soon(F done) {
  for (const auto end = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(1ms))
    if (done()) return true;
  return false;
}

/// A unit summed by the default poll: each push is [sender rank, values...]; serve() sends the
/// sum to every worker.
class SumServed final : public Served {
 public:
  SumServed(transport::Transport& t, transport::Tag tag, std::vector<float> own)
      : Served(t, tag, 0), sum(std::move(own)), in(sum.size() + 1) {}
  std::vector<float> sum;
  std::vector<int> added;  // senders in the order their pushes were added

 protected:
  std::span<std::byte> buffer() override { return std::as_writable_bytes(std::span(in)); }
  void add(std::size_t bytes) override {
    if (bytes != in.size() * sizeof(float)) throw WireError("push of " + std::to_string(bytes) + " bytes");
    added.push_back(static_cast<int>(in[0]));
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += in[i + 1];
  }
  void serve() override {
    for (int w = 0; w < t_.size(); ++w)
      if (w != t_.rank()) t_.send(w, tag_, std::as_bytes(std::span(sum)));
  }

 private:
  std::vector<float> in;
};

void push(transport::Transport& worker, transport::Tag tag, std::vector<float> values) {
  values.insert(values.begin(), static_cast<float>(worker.rank()));
  worker.send(0, tag, std::as_bytes(std::span(values)));
}
}  // namespace

TEST_CASE("the server adds every push in rank order, whatever order they arrive in, and sends the sum") {
  transport::InProcessGroup group(4, 60s);
  Server server(group.rank(0), {1}, 8);
  // Float addition does not associate: rank order gives 0 where arrival order (3, 2, 1) gives 2.
  const std::vector<float> own{1e8f, 5.0f}, p1{1.0f, 1.0f}, p2{1.0f, 2.0f}, p3{-1e8f, 3.0f};
  SumServed unit(group.rank(0), 7, own);
  push(group.rank(3), 7, p3);
  push(group.rank(2), 7, p2);
  auto serving = std::async(std::launch::async, [&] { server.serve(unit); });
  const bool waits_for_1 = soon([&] { return server.stall().peer == 1; });  // it holds the unit
  push(group.rank(1), 7, p1);
  REQUIRE(waits_for_1);
  REQUIRE(serving.wait_for(30s) == std::future_status::ready);
  serving.get();
  REQUIRE(unit.added == std::vector<int>{1, 2, 3});
  std::vector<float> want = own;  // the plain sum, in rank order
  for (const auto* p : {&p1, &p2, &p3})
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += (*p)[i];
  REQUIRE(want == std::vector<float>{0.0f, 11.0f});
  REQUIRE(unit.sum == want);
  for (int w = 1; w < 4; ++w) {
    std::vector<float> got(2);
    REQUIRE(group.rank(w).recv(0, 7, std::as_writable_bytes(std::span(got))) == 2 * sizeof(float));
    REQUIRE(got == want);
  }
}

namespace {
/// A unit whose pushes are all in once `open` is set; serve() records its key, and (the blocker)
/// sets `opens` so that several units become complete in the same pass of the server.
class Gated final : public Served {
 public:
  struct Shared {
    std::mutex mutex;
    std::vector<std::uint32_t> served;  // keys, in the order served
  };
  Gated(transport::Transport& t, transport::Tag tag, std::uint32_t key, Shared& shared, std::atomic<bool>& open,
        std::atomic<bool>* opens = nullptr)
      : Served(t, tag, key), key(key), shared(shared), open(open), opens(opens) {}
  bool poll() override {
    ++polls;
    return open.load();
  }
  void serve() override {
    {
      std::lock_guard lock(shared.mutex);
      shared.served.push_back(key);
    }
    if (opens) opens->store(true);
  }
  std::atomic<int> polls{0};

 private:
  std::uint32_t key;
  Shared& shared;
  std::atomic<bool>& open;
  std::atomic<bool>* opens;
};
}  // namespace

TEST_CASE("of the units whose pushes are all in, the server serves the most urgent first") {
  transport::InProcessGroup group(1, 600s);
  Server server(group.rank(0), {1, 1, 1, 1}, 4);
  Gated::Shared shared;
  std::atomic<bool> go{false}, gate{false};
  // Handed over least urgent first; all three complete in the pass after the blocker is served.
  Gated low(group.rank(0), 0, 3, shared, gate), mid(group.rank(0), 1, 2, shared, gate),
      high(group.rank(0), 2, 1, shared, gate), blocker(group.rank(0), 3, 0, shared, go, &gate);
  std::vector<std::future<void>> serving;
  bool held = true;
  for (Gated* u : {&low, &mid, &high, &blocker}) {
    serving.push_back(std::async(std::launch::async, [&server, u] { server.serve(*u); }));
    held = held && soon([&] { return u->polls.load() > 0; });  // held by the server, not complete
  }
  go.store(true);
  REQUIRE(held);
  for (auto& s : serving) {
    if (s.wait_for(30s) != std::future_status::ready) server.stop();  // fails the units: no hang
    s.get();
  }
  REQUIRE(shared.served == std::vector<std::uint32_t>{0, 1, 2, 3});
}

TEST_CASE("a silent worker fails the unit after the timeout, naming it, and the server with it") {
  transport::InProcessGroup group(2, 300ms);
  Server server(group.rank(0), {2}, 8);
  const auto t0 = std::chrono::steady_clock::now();  // before the unit: its stall counts from its construction
  SumServed unit(group.rank(0), 7, {1.0f}), next(group.rank(0), 3, {1.0f});
  try {
    server.serve(unit);
    FAIL("served without rank 1's push");
  } catch (const PeerTimeout& e) {
    REQUIRE(e.peer == 1);
    REQUIRE_THAT(e.what(), Catch::Contains("waited 300 ms for rank 1 (tag 7)"));
  }
  REQUIRE(std::chrono::steady_clock::now() - t0 >= 300ms);
  push(group.rank(1), 3, {1.0f});  // too late: the server has stopped on the error
  REQUIRE_THROWS_AS(server.serve(next), PeerTimeout);
}

TEST_CASE("a bad push fails every unit the server holds with its error") {
  transport::InProcessGroup group(2, 60s);
  Server server(group.rank(0), {2}, 8);
  SumServed waiting(group.rank(0), 3, {1.0f}), bad(group.rank(0), 5, {1.0f});
  auto held = std::async(std::launch::async, [&] { server.serve(waiting); });  // rank 1 never pushes unit 3
  REQUIRE(soon([&] { return server.stall().peer == 1; }));
  const std::array<float, 1> wrong{};  // no sender rank: one float short
  group.rank(1).send(0, 5, std::as_bytes(std::span(wrong)));
  REQUIRE_THROWS_WITH(server.serve(bad), "push of 4 bytes");
  REQUIRE(held.wait_for(30s) == std::future_status::ready);
  REQUIRE_THROWS_WITH(held.get(), "push of 4 bytes");
}

TEST_CASE("an error in one unit's serve fails that unit alone") {
  transport::InProcessGroup group(1, 600s);
  Server server(group.rank(0), {2}, 4);
  struct Throws final : Served {
    using Served::Served;
    void serve() override { throw WireError("cannot encode the aggregate"); }
  } failing(group.rank(0), 0, 0);
  Gated::Shared shared;
  std::atomic<bool> open{true};
  Gated fine(group.rank(0), 1, 0, shared, open);
  REQUIRE_THROWS_WITH(server.serve(failing), "cannot encode the aggregate");
  server.serve(fine);
  REQUIRE(shared.served == std::vector<std::uint32_t>{0});
}

TEST_CASE("stop fails the units still held, and every unit handed over after it") {
  transport::InProcessGroup group(2, 60s);
  Server server(group.rank(0), {2}, 8);
  SumServed held(group.rank(0), 1, {1.0f}), later(group.rank(0), 2, {1.0f});
  auto serving = std::async(std::launch::async, [&] { server.serve(held); });
  REQUIRE(soon([&] { return server.stall().peer == 1; }));
  server.stop();
  REQUIRE(serving.wait_for(30s) == std::future_status::ready);
  REQUIRE_THROWS_WITH(serving.get(), Catch::Contains("the parameter server stopped"));
  REQUIRE_THROWS_WITH(server.serve(later), Catch::Contains("the parameter server stopped"));
}

TEST_CASE("ParameterServer with its server threads started gives every rank the plain sum") {
  constexpr int kRanks = 3;
  constexpr std::size_t kUnits = 7, kElements = 300;
  const auto value = [](int rank, std::size_t unit, std::size_t i) {  // integers: sums exact in any order
    return static_cast<float>(rank * 100 + static_cast<int>(unit) * 10 + static_cast<int>(i % 9));
  };
  const auto right = testing::run_ranks<int>(kRanks, [&](int r, transport::Transport& t) {
    const collective::ParameterServer ps;
    const std::unique_ptr<collective::Serving> serving =
        ps.start({.transport = t, .elements = std::vector<std::size_t>(kUnits, kElements), .lane_capacity = {kUnits}});
    collective::Workspace ws;
    bool ok = true;
    for (std::uint32_t u = 0; u < kUnits; ++u) {  // each rank serves units u with u % 3 == r
      std::vector<float> data(kElements);
      for (std::size_t i = 0; i < kElements; ++i) data[i] = value(r, u, i);
      collective::Job job{.data = data, .tag = u, .ctx = {.unit = u}, .average = false};
      ps.run(t, codec::Identity{}, job, ws, *serving);
      for (std::size_t i = 0; i < kElements; ++i) {
        float want = 0;
        for (int q = 0; q < kRanks; ++q) want += value(q, u, i);
        ok = ok && data[i] == want;
      }
    }
    serving->stop();
    return ok ? 1 : 0;
  });
  REQUIRE(right == std::vector<int>(kRanks, 1));
}
