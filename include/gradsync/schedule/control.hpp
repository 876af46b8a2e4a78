#pragma once
/// Control: the one lock every wait of a Synchronizer uses, with its stop and failure state. Each
/// part (the leader's credit window, the executors, the caller's wait_for) waits for its own
/// condition *or* a stop, so one failure or shutdown wakes them all.
///
/// The caller's waits (a layer done) have a condition variable of their own, woken only by a
/// change that may complete a layer: the executors finish a sliced layer's units one by one, and
/// waking the caller for each cost a context switch per unit (P3 slices VGG-11 into 1,138 units).
///
/// \code
///   schedule::Control c;
///   c.update([&] { ++done; });                         // change state under the lock, wake waiters
///   bool ok = c.wait_for(timeout, [&] { return done == n; });
///   c.update_caller([&] { return ++layers == n; });    // wakes the caller's wait too when true
///   c.wait_caller([&] { return layers == n; });
///   if (c.fail(std::current_exception())) { ... }      // first error only; stops everything
///   c.rethrow_if_failed();
/// \endcode
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

namespace gradsync::schedule {

class Control {
 public:
  /// Waits until pred() holds (true) or the synchronizer stops (false). pred runs under the lock.
  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopping() || pred(); });
    return !stopping();
  }
  /// As wait, giving up after `timeout` (false).
  template <class Pred, class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout, Pred pred) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return stopping() || pred(); }) && !stopping();
  }
  /// The caller's wait: as wait, woken only by update_caller's completions, stop() and fail().
  template <class Pred>
  bool wait_caller(Pred pred) {
    std::unique_lock lock(mutex_);
    caller_.wait(lock, [&] { return stopping() || pred(); });
    return !stopping();
  }
  /// Sleeps for `d` or until the synchronizer stops, whichever comes first; progress (update())
  /// does not wake it. For pollers that only look for a stop: a thread woken by every unit's
  /// update costs a context switch each (thousands per iteration with P3's slices) and
  /// preempts the compute threads.
  template <class Rep, class Period>
  void nap(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(mutex_);
    stopped_.wait_for(lock, d, [&] { return stopping(); });
  }
  /// Waits until pred() holds, stopping or not (for threads to leave what they were doing).
  template <class Pred>
  void settle(Pred pred) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, pred);
  }
  /// Runs `change` under the lock, then wakes every waiter.
  template <class F>
  void update(F&& change) {
    {
      std::lock_guard lock(mutex_);
      change();
    }
    cv_.notify_all();
  }
  /// Runs `change` under the lock and wakes nobody: for state no waiter's condition depends on
  /// becoming true (a wake-up per change would cost every waiting thread a context switch).
  template <class F>
  void change(F&& f) {
    std::lock_guard lock(mutex_);
    f();
  }
  /// As update; `change` returns whether the caller's wait may now be over (it also wakes it).
  template <class F>
  void update_caller(F&& change) {
    bool caller = false;
    {
      std::lock_guard lock(mutex_);
      caller = change();
    }
    cv_.notify_all();
    if (caller) caller_.notify_all();
  }
  void notify() {
    update([] {});
  }

  bool stopping() const { return stop_.load(); }
  bool failed() const { return failed_.load(); }
  /// Stops every wait (shutdown, or after a failure).
  void stop() {
    update([&] { stop_.store(true); });
    caller_.notify_all();
    stopped_.notify_all();
  }
  /// Records `error` and stops, if no error came before; true when it was the first.
  bool fail(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      if (error_) return false;
      error_ = std::move(error);
      failed_.store(true);
      stop_.store(true);
    }
    cv_.notify_all();
    caller_.notify_all();
    stopped_.notify_all();
    return true;
  }
  void rethrow_if_failed() const {
    if (!failed_.load()) return;
    std::lock_guard lock(mutex_);
    std::rethrow_exception(error_);
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable caller_;   // wait_caller(): woken by update_caller(), stop() and fail()
  std::condition_variable stopped_;  // nap(): woken by stop() and fail() only
  std::atomic<bool> stop_{false}, failed_{false};
  std::exception_ptr error_;
};

}  // namespace gradsync::schedule
