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
/// The poller tests a few times back to back, then sleeps between passes: 20 us at first, growing
/// by half each pass that finds nothing, at most `cap`. It starts over at every completion and at
/// every new waiter (a waiter wakes it: in a chain of messages, each waits for the last, and the
/// next one's request must be tested at once, not after the poller's sleep). A completion is
/// noticed at most `cap` late; meanwhile the sockets' buffers keep the link busy.
///
/// `cap` is what a chained step may lose, so it is about one slice's time on a fast link. A 4-rank
/// ring's unit is 6 chained steps, and with ranks sharing cores the neighbour's message often
/// comes milliseconds after the last completion, when the sleep has reached the cap: P3 on VGG-11
/// over 4 ranks on 2 cores took 4.9 s per iteration with a 1 ms cap, 2.1 s with 200 us and 2.0 s
/// with 100 us. A longer cap saves CPU only where the link sets the pace, not time (2 ranks at
/// 300 Mbit/s: 1.06, 1.33 and 1.51 CPU-s per iteration, the same 5.1 s iteration).
/// Measured in benchmarks/e2e/results/2026-11-29-poller-cap.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace gradsync::transport::detail {

class MpiWaits {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds first_sleep{20}, cap{100};
  static constexpr int spins = 8;

  /// Waits until `req` completes: true, `st` its status with MPI_ERROR set (an error of the
  /// request, or of the test itself). False once `deadline` passes, `req` still pending.
  bool wait(MPI_Request& req, MPI_Status& st, clock::time_point deadline) {
    if (test_one(req, st)) return true;  // done already: no lock, no hand-over
    Waiter me{&req, &st};
    std::unique_lock lock(mutex_);
    waiters_.push_back(&me);
    fresh_ = true;
    poller_wake_.notify_one();
    while (!me.done) {
      if (clock::now() >= deadline) {
        leave(me);
        return false;
      }
      if (!polling_) poll_for_all(lock, me, deadline);
      else me.wake.wait_until(lock, deadline);
    }
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
    auto sleep = first_sleep;
    while (!self.done && clock::now() < deadline) {
      if (test_all() || fresh_) {
        passes = 0;
        sleep = first_sleep;
      }
      fresh_ = false;
      if (self.done) break;
      if (++passes <= spins) continue;
      poller_wake_.wait_for(lock, sleep);
      sleep = std::min(sleep + sleep / 2, cap);
    }
    polling_ = false;
    if (!self.done) leave(self);
    else hand_over();
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
  std::condition_variable poller_wake_;  // a new waiter wakes the poller
  bool polling_ = false, fresh_ = false;
  std::vector<MPI_Request> requests_;  // test_all's scratch
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
};

}  // namespace gradsync::transport::detail
