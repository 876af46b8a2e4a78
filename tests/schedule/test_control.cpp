// Control: the one lock of a Synchronizer. nap() is for pollers that only look for a stop (the
// abort watcher): it must last its whole time through any amount of progress, and end at once on
// stop() or fail(). The caller's wait wakes for completions that may end it, a stop or a failure.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gradsync/schedule/control.hpp>

using namespace std::chrono_literals;
using gradsync::schedule::Control;

namespace {
// Naps for `d` on a thread of its own; `woke` turns true when the nap returns.
struct Napper {
  Napper(Control& c, std::chrono::milliseconds d) : th([&c, d, this] {
    c.nap(d);
    woke = true;
  }) {}
  ~Napper() { th.join(); }
  std::atomic<bool> woke{false};
  std::thread th;
};
bool becomes_true(const std::atomic<bool>& flag, std::chrono::milliseconds within) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (!flag && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  return flag;
}
}  // namespace

TEST_CASE("nap lasts through progress updates and ends at stop") {
  Control c;
  int progress = 0;
  Napper n(c, 60s);
  for (int i = 0; i < 1000; ++i) c.update([&] { ++progress; });
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(n.woke);
  c.stop();
  CHECK(becomes_true(n.woke, 5s));
  CHECK(progress == 1000);
}

TEST_CASE("nap ends at a failure, and returns after its time otherwise") {
  SECTION("failure") {
    Control c;
    Napper n(c, 60s);
    std::this_thread::sleep_for(20ms);
    CHECK(c.fail(std::make_exception_ptr(std::runtime_error("x"))));
    CHECK(becomes_true(n.woke, 5s));
  }
  SECTION("its time") {
    Control c;
    const auto t0 = std::chrono::steady_clock::now();
    c.nap(30ms);
    CHECK(std::chrono::steady_clock::now() - t0 >= 30ms);
    CHECK_FALSE(c.stopping());
  }
  SECTION("already stopped: at once") {
    Control c;
    c.stop();
    const auto t0 = std::chrono::steady_clock::now();
    c.nap(60s);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }
}

TEST_CASE("the caller's wait is woken by a completion it may need, a stop or a failure, not by every update") {
  Control c;
  std::atomic<int> looks{0};  // how often the waiter's condition was evaluated
  int layers = 0;
  std::atomic<bool> woke{false}, ok{false};
  std::thread waiter([&] {
    ok = c.wait_caller([&] {
      ++looks;
      return layers == 1;
    });
    woke = true;
  });
  while (looks == 0) std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 1000; ++i) {
    c.update([] {});
    c.update_caller([] { return false; });  // units finished, no layer done
  }
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(woke);
  CHECK(looks < 10);  // one look at the start (a spurious wake-up or two at most), not 2,000
  c.update_caller([&] { return ++layers == 1; });
  CHECK(becomes_true(woke, 5s));
  waiter.join();
  CHECK(ok);
}

TEST_CASE("a stop or a failure ends the caller's wait, false") {
  const bool fail = GENERATE(false, true);
  Control c;
  std::atomic<bool> ended{false}, result{true};
  std::thread w([&] {
    result = c.wait_caller([] { return false; });
    ended = true;
  });
  std::this_thread::sleep_for(20ms);
  if (fail) c.fail(std::make_exception_ptr(std::runtime_error("x")));
  else c.stop();
  CHECK(becomes_true(ended, 5s));
  w.join();
  CHECK_FALSE(result);
}
