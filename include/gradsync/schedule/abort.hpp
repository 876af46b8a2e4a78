#pragma once
/// PeerAbort: how a failing rank tells every peer at once, how a rank learns one failed, so no
/// rank waits out a timeout for a peer that is gone, and how the survivors agree which rank is.
///
/// A failing rank sends each peer its error's text on transport::abort_tag with the session of the
/// handshake (schedule/handshake.hpp); each rank polls for such messages, and one of its own
/// session fails it with the peer's words. A message of another session (left over from an
/// earlier synchronizer on the same transport) is dropped.
///
/// A timeout names only the rank waited for, which may itself be waiting: in a ring, when rank 2
/// dies, rank 0 waits for rank 2 and rank 1 for rank 0, and both time out at about the same time.
/// So a rank whose wait timed out (PeerTimeout) settles instead of failing alone: it tells every
/// peer whom it suspects, a peer that hears of it answers that it is alive and whom it is stuck
/// waiting for itself, if anyone, and after a grace period each rank names the suspected ranks
/// that sent nothing - the dead or cut-off ones - or, if every suspect answered, the first report.
///
/// \code
///   schedule::PeerAbort abort(transport, session);
///   abort.tell(std::current_exception());               // on this rank's own error
///   error = abort.settle(error, grace);                 // instead, when it is a PeerTimeout
///   if (auto e = abort.watch(control, grace)) fail(e);  // a thread: until a peer fails or control stops
/// \endcode
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../core/error.hpp"
#include "../transport/cancellable.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"

namespace gradsync::schedule {

class PeerAbort {
 public:
  /// `t`: a transport that still sends after the synchronizer's own one is cancelled.
  /// `waiting_for`: the peer this rank is stuck waiting for, or -1 (what it reports).
  PeerAbort(transport::Transport& t, std::uint64_t session, std::function<int()> waiting_for = [] { return -1; })
      : t_(t), session_(session), waiting_for_(std::move(waiting_for)) {}

  std::uint64_t session() const { return session_; }

  /// Sends every peer `error`'s text (best effort: a peer may be gone already).
  void tell(std::exception_ptr error) { broadcast(Kind::failed, -1, text_of(error)); }

  /// The error to fail with after this rank's `error` (a PeerTimeout, or null: a peer's report
  /// woke it), agreed with the peers within `grace`. Every caller gets the first caller's verdict.
  std::exception_ptr settle(std::exception_ptr error, std::chrono::milliseconds grace) {
    int suspect = timed_out_on(error);
    {
      std::unique_lock lock(mutex_);
      if (settling_) {
        settled_.wait(lock, [&] { return verdict_ != nullptr; });
        return verdict_;
      }
      settling_ = true;
    }
    // Who this rank is stuck on says more than the wait that timed out: a worker waits for a
    // server's reply, the server for the push of the rank that is gone.
    if (const int stuck = waiting_for_(); stuck >= 0) suspect = stuck;
    broadcast(suspect >= 0 ? Kind::suspects : Kind::alive, suspect, error ? text_of(error) : "");
    for (const auto deadline = std::chrono::steady_clock::now() + grace; std::chrono::steady_clock::now() < deadline;)
      if (!poll()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lock(mutex_);
    verdict_ = decide(suspect, error, grace);
    settled_.notify_all();
    return verdict_;
  }

  /// Polls the peers until one reports a failure (returns it as a PeerError naming that rank), one
  /// reports a timeout (returns settle's verdict), or `control` stops (returns null).
  std::exception_ptr watch(Control& control, std::chrono::milliseconds grace) {
    for (; !control.stopping(); control.nap(transport::Cancellable::slice)) {
      poll();
      std::unique_lock lock(mutex_);
      for (const Report& r : reports_)
        if (r.kind == Kind::failed) return failed(r);
      if (!reports_.empty() && !settling_) {  // (settling already: that verdict fails this rank)
        lock.unlock();
        return settle(nullptr, grace);
      }
    }
    return nullptr;
  }

 private:
  enum class Kind : std::uint32_t { failed, suspects, alive };
  struct Message {
    std::uint64_t session = 0;
    Kind kind = Kind::failed;
    std::int32_t suspect = -1;  ///< the rank a timed-out wait was for (Kind::suspects)
    char text[1000];
  };
  static constexpr std::size_t header = offsetof(Message, text);
  struct Report {
    int from;
    Kind kind;
    int suspect;
    std::string text;
  };

  static std::string text_of(std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown error";
    }
  }

  void broadcast(Kind kind, int suspect, const std::string& text) {
    Message m{session_, kind, suspect, {}};
    const std::size_t n = text.copy(m.text, sizeof m.text);
    const auto bytes = std::as_bytes(std::span(&m, 1)).first(header + n);
    for (int p = 0; p < t_.size(); ++p) {
      if (p == t_.rank()) continue;
      try {
        t_.send(p, transport::abort_tag, bytes);
      } catch (...) {
      }
    }
  }

  /// Receives what the peers sent of this session into reports_; true if anything came.
  bool poll() {
    bool any = false;
    Message m;
    for (int p = 0; p < t_.size(); ++p) {
      if (p == t_.rank()) continue;
      const auto got = t_.try_recv(p, transport::abort_tag, std::as_writable_bytes(std::span(&m, 1)));
      if (!got || *got < header || m.session != session_) continue;  // none, or a stale one
      const int suspect = m.suspect >= 0 && m.suspect < t_.size() ? m.suspect : -1;  // never trust a rank
      std::lock_guard lock(mutex_);
      reports_.push_back({p, m.kind, suspect, std::string(m.text, *got - header)});
      any = true;
    }
    return any;
  }

  static std::exception_ptr failed(const Report& r) {
    return std::make_exception_ptr(PeerError("gradsync: rank " + std::to_string(r.from) + " failed: " + r.text));
  }

  /// A peer's own failure first; else the suspects that sent nothing; else this rank's own error
  /// or the first report.
  std::exception_ptr decide(int suspect, std::exception_ptr mine, std::chrono::milliseconds grace) const {
    for (const Report& r : reports_)
      if (r.kind == Kind::failed) return failed(r);
    std::set<int> answered{t_.rank()};
    std::map<int, std::set<int>> waited;  // suspect -> the ranks that timed out waiting for it
    if (suspect >= 0) waited[suspect].insert(t_.rank());
    for (const Report& r : reports_) {
      answered.insert(r.from);
      if (r.kind == Kind::suspects && r.suspect >= 0) waited[r.suspect].insert(r.from);
    }
    std::string silent, waiters;
    std::set<int> all_waiters;
    for (const auto& [rank, by] : waited) {
      if (answered.count(rank)) continue;
      silent += (silent.empty() ? "" : ", ") + std::to_string(rank);
      all_waiters.insert(by.begin(), by.end());
    }
    for (int w : all_waiters) waiters += (waiters.empty() ? "" : ", ") + std::to_string(w);
    if (!silent.empty())
      return std::make_exception_ptr(PeerError(
          "gradsync: rank " + silent + " stopped answering: it died or its network is down (rank " + waiters +
          " timed out waiting for it, and it sent no word within " + std::to_string(grace.count()) +
          " ms after; seen from rank " + std::to_string(t_.rank()) + " of " + std::to_string(t_.size()) +
          "): restart from the last checkpoint once that node is back, or without it"));
    if (mine || reports_.empty()) return mine;
    const auto first = std::find_if(reports_.begin(), reports_.end(), [](const Report& r) { return r.kind == Kind::suspects; });
    return failed(first != reports_.end() ? *first : reports_.front());
  }

  transport::Transport& t_;
  std::uint64_t session_;
  std::function<int()> waiting_for_;
  std::mutex mutex_;  // reports_, settling_, verdict_
  std::condition_variable settled_;
  std::vector<Report> reports_;
  bool settling_ = false;
  std::exception_ptr verdict_;
};

}  // namespace gradsync::schedule
