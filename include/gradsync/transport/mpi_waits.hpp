#pragma once
/// MpiWaits: the waits of several threads on MPI requests, polled by one of them at a time.
///
/// Open MPI over TCP moves data only inside MPI calls, and each MPI_Test of an unfinished request
/// is one pass of its progress engine: a poll() over every socket, moving every request. Threads
/// that each poll their own request pay for that pass (and a wake-up) once per thread, to no gain:
/// with two executors waiting out a slow link, rank 0 spent 0.37 CPU-s per iteration and executor
/// on it (benchmarks/e2e/results/2026-11-28-profile-p3-300mbit). So the first waiter polls for
/// all (MPI_Testsome over every waiting request) while the others sleep on a condition variable
/// until it finds their request done, or hands the polling on because its own is.
///
/// The poller tests a few times back to back after every completion and after a new waiter comes
/// (on a fast link a chained message's completion is caught within tens of microseconds), then
/// sleeps between passes. A new waiter does not wake a sleeping poller: it has just tested its own
/// request, and the poller's next pass starts the back-to-back tests again. Each wake-up is a
/// context switch, the largest CPU cost of P3's many small units when ranks share cores: sleeps
/// that started at 20 us after every event and grew to 100 us, and a wake-up per new waiter, cost
/// 4 ranks on 2 cores 0.11 CPU-s per rank and iteration at 1 Gbit/s (VGG-11: 1.114 against 0.998 s),
/// at an equal or shorter iteration on every link measured (benchmarks/e2e/results/2026-11-29-poller-flat).
///
/// The sleep is an eighth of the time a queued wait has been taking (a running mean), within
/// `min_pause`..`max_pause`: a pass that comes late then costs a chained step about 6% of a wait.
/// Where messages come within a millisecond (2 ranks on a fast link: 0.7-0.8 ms) it stays at
/// 100 us, for 200 us there made VGG-11's iteration 5% longer; where they take longer (a slow link,
/// or 4 ranks sharing 2 cores: 1.6-3.2 ms) the other units in flight hide a 200 us pause, which took
/// 17% less CPU on 2 ranks at 300 Mbit/s and 1-8% on 4 ranks at 1 Gbit/s, no iteration longer
/// (benchmarks/e2e/results/2026-11-29-poller-pause). The cap bounds what a long wait in the mean
/// costs the next fast one: with 2 units in flight on 4 ranks a 1 ms cap made an iteration 2.5x as
/// long (benchmarks/e2e/results/2026-11-29-poller-cap), and 400 us saved no CPU over 200.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace gradsync::transport::detail {

class MpiWaits {
 public:
  using clock = std::chrono::steady_clock;
  using duration = std::chrono::duration<double, std::micro>;
  static constexpr std::chrono::microseconds min_pause{100}, max_pause{200};
  static constexpr int pause_share = 8;  // the sleep is 1/pause_share of a typical wait
  static constexpr int mean_weight = 32;  // each wait moves the running mean by 1/mean_weight
  static constexpr int spins = 8;

  /// Waits until `req` completes: true, `st` its status with MPI_ERROR set (an error of the
  /// request, or of the test itself). False once `deadline` passes, `req` still pending.
  bool wait(MPI_Request& req, MPI_Status& st, clock::time_point deadline) {
    if (test_one(req, st)) return true;  // done already: no lock, no hand-over
    Waiter me{&req, &st};
    const clock::time_point since = clock::now();
    std::unique_lock lock(mutex_);
    waiters_.push_back(&me);
    fresh_ = true;  // the poller's next pass tests back to back again
    while (!me.done) {
      if (clock::now() >= deadline) {
        leave(me);
        return false;
      }
      if (!polling_) poll_for_all(lock, me, deadline);
      else me.wake.wait_until(lock, deadline);
    }
    typical_wait_ += (clock::now() - since - typical_wait_) / mean_weight;
    return true;
  }

 private:
  struct Waiter {
    MPI_Request* req;
    MPI_Status* st;
    std::condition_variable wake;
    bool done = false;
  };

  static bool test_one(MPI_Request& req, MPI_Status& st) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, &st);
    if (rc != MPI_SUCCESS) st.MPI_ERROR = rc;
    else if (done) st.MPI_ERROR = MPI_SUCCESS;  // single-request calls leave the field undefined
    return rc != MPI_SUCCESS || done;
  }

  /// Polls every waiter's request until `self`'s is done or its deadline passes, then hands the
  /// polling to a waiter still waiting. The caller holds `lock` (released only while sleeping).
  void poll_for_all(std::unique_lock<std::mutex>& lock, Waiter& self, clock::time_point deadline) {
    polling_ = true;
    int passes = 0;
    while (!self.done && clock::now() < deadline) {
      if (test_all() || fresh_) passes = 0;
      fresh_ = false;
      if (self.done) break;
      if (++passes <= spins) continue;
      const duration nap = pause();  // read under the lock: waiters update the mean
      lock.unlock();  // waiters come and leave meanwhile
      std::this_thread::sleep_for(nap);
      lock.lock();
    }
    polling_ = false;
    if (!self.done) leave(self);
    else hand_over();
  }
  /// The sleep between passes (the rule in the file's comment). Under the lock.
  duration pause() const {
    return std::clamp(typical_wait_ / pause_share, duration{min_pause}, duration{max_pause});
  }
  /// `w` gives up (its deadline passed): out of the list, and if nobody polls, another waiter will.
  void leave(Waiter& w) {
    std::erase(waiters_, &w);
    if (!polling_) hand_over();
  }
  void hand_over() {
    if (!waiters_.empty()) waiters_.front()->wake.notify_one();
  }

  /// One progress pass over every waiting request; true when any completed (each is woken and
  /// leaves the list). Under the lock: a waiter cannot leave while its request is being tested.
  bool test_all() {
    requests_.clear();
    for (Waiter* w : waiters_) requests_.push_back(*w->req);
    indices_.resize(requests_.size());
    statuses_.resize(requests_.size());
    int count = 0;
    const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, indices_.data(),
                                statuses_.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {  // the call itself failed: every wait ends with it
      for (Waiter* w : waiters_) finish(*w, *w->req, rc);
      waiters_.clear();
      return true;
    }
    if (count == MPI_UNDEFINED || count == 0) return false;
    for (int i = 0; i < count; ++i) {
      const int k = indices_[i];
      *waiters_[k]->st = statuses_[i];
      finish(*waiters_[k], requests_[k], rc == MPI_SUCCESS ? MPI_SUCCESS : statuses_[i].MPI_ERROR);
      waiters_[k] = nullptr;
    }
    std::erase(waiters_, nullptr);
    return true;
  }
  static void finish(Waiter& w, MPI_Request after, int error) {
    *w.req = after;
    w.st->MPI_ERROR = error;
    w.done = true;
    w.wake.notify_one();
  }

  std::mutex mutex_;  // guards everything below
  std::vector<Waiter*> waiters_;
  bool polling_ = false, fresh_ = false;
  duration typical_wait_{0};  // running mean of queued waits, from queueing to completion
  std::vector<MPI_Request> requests_;  // test_all's scratch
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
};

}  // namespace gradsync::transport::detail
