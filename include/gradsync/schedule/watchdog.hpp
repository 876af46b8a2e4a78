#pragma once
/// Watchdog: the one place where a wait that lasted Options::timeout becomes an error, and where
/// the rank to blame is found. One per Synchronizer, with a thread of its own.
///
/// Timeouts. Every wait of a synchronizer ends within Options::timeout. The caller's waits
/// (wait_for; gradient_ready, which waits for the previous iteration's use of its span; the
/// destructor) register here, and the watchdog's thread checks them every `slice`; a wait
/// inside the transport or a collective gives up by itself after the same timeout with a
/// PeerTimeout, which comes here through fail(). Either way nothing fails before the diagnosis.
///
/// Diagnosis (diagnosis.hpp). A timeout names only the rank waited for, which may itself be
/// waiting. So the watchdog asks every peer whom it waits for (transport::Cancellable's receives
/// and sends, the leader's decisions and reports, the parameter server's pushes), over
/// watchdog_channel.hpp's messages; a live peer's watchdog answers within a slice, whatever that
/// rank is doing, diagnosing included. After grace(timeout), or once every peer answered, the
/// chain of waits through the answers ends at the rank to blame: one that did not answer (gone),
/// or one that answers but waits for no peer (alive, and stopped handing over gradients).
/// The verdict fails this rank and goes to every peer, which fails with it at once (one that is
/// diagnosing too takes it), and a rank that has failed answers every later question with its
/// failure. So a survivor that times out after another survivor has decided, or has even exited,
/// still names the dead rank, never the survivor that left.
///
/// The bound. A blocked call of a survivor (wait_for, gradient_ready, ~Synchronizer) throws at most
///     Options::timeout + grace(timeout) + 2 * slice
/// after it began to wait, grace(timeout) = clamp(timeout / 16, 0.5 s, 2 s) and slice = 20 ms: the
/// watchdog sees the wait expire within a slice, waits at most grace(timeout) for the answers, and
/// every wait of the synchronizer's threads ends within a slice of the verdict (a collective that
/// blocks inside a vendor library - mpi, gloo, nccl - holds its executor until that library's own
/// timeout). A peer's verdict can make it earlier, never later.
///
/// \code
///   schedule::Watchdog dog({user_transport, cancellable, control, &leader, [&] { return runtime->stall(); }},
///                          session, options.timeout);
///   dog.start();                                                       // once what it watches is ready
///   if (!dog.wait([&] { return table.layer_done(l); }, "wait_for", l)) ...;  // the caller's waits
///   dog.fail(std::current_exception());                                // a thread's error: diagnosed first if a timeout
///   dog.stop(why);                                                     // ends every wait (shutdown)
/// \endcode
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../transport/cancellable.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "caller_waits.hpp"
#include "control.hpp"
#include "diagnosis.hpp"
#include "leader.hpp"
#include "watchdog_channel.hpp"

namespace gradsync::schedule {

class Watchdog {
 public:
  using clock = std::chrono::steady_clock;
  /// How often the watchdog looks at the caller's waits and its peers' messages.
  static constexpr std::chrono::milliseconds slice = transport::Cancellable::slice;
  /// How long the peers have to answer whom they wait for: clamp(timeout / 16, 0.5 s, 2 s). A live
  /// peer answers within a slice or two (12-29 ms measured across network namespaces with both
  /// cores of the machine busy); it must not be taken for a dead one however loaded its machine.
  static constexpr std::chrono::milliseconds grace(std::chrono::milliseconds timeout) {
    return std::clamp<std::chrono::milliseconds>(timeout / 16, std::chrono::milliseconds(500), std::chrono::seconds(2));
  }

  /// What the watchdog watches and stops; all owned by the caller and outliving the watchdog.
  struct Watched {
    transport::Transport& user;     ///< its messages go here: it still sends after `t` is cancelled
    transport::Cancellable& t;      ///< the synchronizer's transport: its waits; cancelled on failure
    Control& control;               ///< failed (or stopped) on failure
    Leader* leader = nullptr;       ///< its waits for decisions and reports; woken on failure
    std::function<transport::Wait()> collective{};  ///< a collective's own stalled wait (collective::Runtime::stall)
  };

  /// `session`: the handshake's (schedule/handshake.hpp); a message of another one (left over
  /// from an earlier synchronizer on the same transport) is dropped.
  Watchdog(Watched watched, std::uint64_t session, std::chrono::milliseconds timeout)
      : w_(std::move(watched)), timeout_(timeout), grace_(grace(timeout)), channel_(w_.user, session),
        inquiry_(w_.t.rank(), w_.t.size(), timeout_, grace_) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    woken_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Starts the thread; call it once everything in Watched is ready.
  void start() {
    thread_ = std::thread([this] { run(); });
  }

  /// The caller's wait: until done() holds (true) or the synchronizer stops (false, also when it
  /// failed). done() may become true only where a layer completes (Control::update_caller wakes
  /// this wait only then). The watchdog fails the synchronizer if it lasts the timeout (see the
  /// bound above).
  template <class Done>
  bool wait(Done&& done, const char* who, std::size_t index) {
    if (done()) return true;
    const CallerWaits::Wait me{clock::now(), who, index};
    callers_.add(me);
    const bool ok = w_.control.wait_caller(done);
    callers_.remove(me);
    return ok;
  }

  /// This rank's error, from any thread. A timeout (PeerTimeout) is diagnosed first; any other
  /// error fails the synchronizer at once and goes to every peer, which fails with "rank R
  /// failed: <its text>".
  void fail(std::exception_ptr error) {
    if (is_timeout(error)) {
      {
        std::lock_guard lock(mutex_);
        if (!timed_out_) timed_out_ = error;
        suspects_.push_back({timed_out_on(error), clock::now()});
      }
      woken_.notify_all();
      return;
    }
    finish(error, Kind::failed, true);
  }

  /// Ends every wait: the caller's, the threads' and the transport's (with `why`).
  void stop(std::exception_ptr why) {
    w_.control.stop();
    w_.t.cancel(std::move(why));
    if (w_.leader) w_.leader->stop();
  }

 private:
  using Kind = WatchdogChannel::Kind;

  static bool is_timeout(const std::exception_ptr& error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const PeerTimeout&) {
      return true;
    } catch (...) {
    }
    return false;
  }
  static std::string text_of(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown error";
    }
  }
  int rank() const { return w_.t.rank(); }
  bool quitting() const {
    std::lock_guard lock(mutex_);
    return quit_;
  }
  int size() const { return w_.t.size(); }

  void run() {
    try {
      for (;;) {
        poll();
        if (const auto trigger = due()) diagnose(*trigger);
        std::unique_lock lock(mutex_);
        woken_.wait_for(lock, slice, [&] { return quit_ || (timed_out_ && !diagnosed_); });
        if (quit_) return;
      }
    } catch (...) {  // out of memory, say: fail rather than leave the caller's waits unwatched
      finish(std::current_exception(), Kind::failed, true);
    }
  }

  /// What to diagnose now, if anything: a reported timeout, or the caller's oldest wait once it
  /// has lasted the timeout. Only one diagnosis ever runs: its verdict fails the synchronizer.
  std::optional<Trigger> due() {
    {
      std::lock_guard lock(mutex_);
      if (diagnosed_ || w_.control.failed()) return std::nullopt;
      if (timed_out_) return Trigger{timed_out_};
    }
    if (const auto late = callers_.overdue(timeout_)) return Trigger{nullptr, late->who, late->index};
    return std::nullopt;
  }

  void diagnose(const Trigger& trigger) {
    {
      std::lock_guard lock(mutex_);
      diagnosed_ = true;
    }
    inquiry_.open();
    channel_.broadcast(Kind::query, inquiry_.round(), {});
    for (const auto deadline = clock::now() + grace_;
         !inquiry_.complete() && !w_.control.failed() && !quitting() && clock::now() < deadline;) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    inquiry_.close();
    if (w_.control.failed()) return;  // a peer's verdict or failure came first, or an error of this rank
    finish(inquiry_.verdict(waited_for(), trigger, w_.t.describe()), Kind::verdict, true);
  }

  /// Fails the synchronizer with `error` if nothing failed it before, and tells every peer
  /// (`tell`); later questions get the failure as the answer.
  void finish(std::exception_ptr error, Kind kind, bool tell) {
    if (!w_.control.fail(error)) return;
    const std::string text = text_of(error);
    {
      std::lock_guard lock(mutex_);
      // A rank asking later takes an adopted verdict or a peer's failure verbatim.
      failure_ = {tell ? kind : Kind::verdict, text};
    }
    if (tell) channel_.broadcast(kind, 0, text);
    stop(error);
  }

  /// Every peer this rank waits for now, the longest-waited first.
  std::vector<int> waited_for() const {
    std::vector<transport::Wait> waits;
    const auto add = [&](transport::Wait w) { waits.push_back(w); };
    w_.t.waits(add);
    if (w_.leader) w_.leader->waits(add);
    if (w_.collective) add(w_.collective());
    {
      std::lock_guard lock(mutex_);
      waits.insert(waits.end(), suspects_.begin(), suspects_.end());
    }
    std::ranges::stable_sort(waits, {}, &transport::Wait::since);
    std::vector<int> peers;
    for (const transport::Wait& w : waits)
      if (w.peer >= 0 && w.peer < size() && w.peer != rank() && std::ranges::find(peers, w.peer) == peers.end())
        peers.push_back(w.peer);
    return peers;
  }

  /// Takes in every peer's messages that have come.
  void poll() {
    channel_.poll([&](int peer, const WatchdogChannel::Header& h, std::span<const std::byte> payload) {
      switch (h.kind) {
        case Kind::failed:
          finish(std::make_exception_ptr(PeerError("gradsync: rank " + std::to_string(peer) +
                                                   " failed: " + WatchdogChannel::text(payload))),
                 Kind::failed, false);
          break;
        case Kind::verdict:
          finish(std::make_exception_ptr(PeerError(WatchdogChannel::text(payload))), Kind::verdict, false);
          break;
        case Kind::query:
          answer(peer, h.round);
          break;
        case Kind::answer:
          inquiry_.take(peer, h.round, WatchdogChannel::ranks(payload));
          break;
      }
    });
  }
  /// Tells `peer` whom this rank waits for, or, once it failed, with what.
  void answer(int peer, std::int32_t round) {
    std::optional<std::pair<Kind, std::string>> failure;
    {
      std::lock_guard lock(mutex_);
      failure = failure_;
    }
    if (failure) return channel_.send_text(peer, failure->first, round, failure->second);
    channel_.send_answer(peer, round, waited_for());
  }

  Watched w_;
  std::chrono::milliseconds timeout_, grace_;
  CallerWaits callers_;

  mutable std::mutex mutex_;  // guards the members up to thread_
  std::condition_variable woken_;
  std::exception_ptr timed_out_;             // the first PeerTimeout reported
  std::vector<transport::Wait> suspects_;    // the peers of the PeerTimeouts reported
  std::optional<std::pair<Kind, std::string>> failure_;  // set once this rank failed
  bool diagnosed_ = false, quit_ = false;
  std::thread thread_;

  // The watchdog's thread only.
  WatchdogChannel channel_;
  Inquiry inquiry_;
};

}  // namespace gradsync::schedule
