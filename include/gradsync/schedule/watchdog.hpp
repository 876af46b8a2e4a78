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
/// Diagnosis. A timeout names only the rank waited for, which may itself be waiting: in a ring,
/// when rank 2 dies, rank 0 waits for rank 2 and rank 1 for rank 0, and both time out at about
/// the same time. So the watchdog asks every peer whom it waits for (transport::Cancellable's
/// receives and sends, the leader's decisions and reports, the parameter server's pushes); a live
/// peer's watchdog answers within a slice, whatever that rank is doing, diagnosing included. After
/// grace(timeout), or once every peer answered:
///  - a peer that did not answer is gone (it died, or its network is down). The verdict names the
///    silent ranks that this rank's waits lead to through the answers, or every silent rank where
///    the chain breaks (a rank asked between two waits);
///  - if every peer answered, the chain of waits from this rank ends at a rank that waits for no
///    peer: it is alive and stopped handing over gradients (its training loop is stuck or slower
///    than the timeout). A chain that loops (every rank waits for another) blames nobody: the
///    timeout's own message stands.
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
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../core/error.hpp"
#include "../transport/cancellable.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "control.hpp"
#include "leader.hpp"
#include "tags.hpp"

namespace gradsync::schedule {

namespace detail {

/// Whom a diagnosis blames, from this rank's waits and the peers' answers.
struct Blame {
  enum class Kind { none, silent, idle };
  Kind kind = Kind::none;
  std::vector<int> ranks;    ///< silent: the ranks blamed; idle: the rank at the chain's end
  std::vector<int> waiters;  ///< silent: the ranks known to wait for them; idle: the ranks between
};

/// `mine`: the peers rank `self` waits for, the longest-waited first; answers[p]: the peers rank p
/// said it waits for, alike (nullopt: p did not answer; answers[self] is not read).
inline Blame blame(int self, const std::vector<int>& mine, const std::vector<std::optional<std::vector<int>>>& answers) {
  const int n = static_cast<int>(answers.size());
  const auto answered = [&](int r) { return r == self || answers[r].has_value(); };
  const auto edges = [&](int r) -> const std::vector<int>& { return r == self ? mine : *answers[r]; };
  // Breadth first from this rank along the waits, remembering who led where.
  std::vector<int> order{self}, parent(n, -1);
  std::vector<char> seen(n, 0);
  seen[self] = 1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!answered(order[i])) continue;  // silent: whom it waits for is unknown
    for (int p : edges(order[i]))
      if (p >= 0 && p < n && !seen[p]) {
        seen[p] = 1;
        parent[p] = order[i];
        order.push_back(p);
      }
  }
  Blame b;
  for (int r : order)
    if (!answered(r)) b.ranks.push_back(r);
  if (b.ranks.empty())  // silent ranks the waits do not lead to (the chain broke): still the likeliest
    for (int r = 0; r < n; ++r)
      if (!answered(r)) b.ranks.push_back(r);
  if (!b.ranks.empty()) {
    b.kind = Blame::Kind::silent;
    std::ranges::sort(b.ranks);
    for (int r = 0; r < n; ++r)
      if (answered(r) && std::ranges::any_of(edges(r), [&](int p) { return std::ranges::binary_search(b.ranks, p); }))
        b.waiters.push_back(r);
    return b;
  }
  for (int r : order)
    if (r != self && edges(r).empty()) {
      b.kind = Blame::Kind::idle;
      b.ranks = {r};
      for (int p = parent[r]; p != self; p = parent[p]) b.waiters.insert(b.waiters.begin(), p);
      return b;
    }
  return b;
}

/// "rank 2" or "ranks 1, 2".
inline std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace detail

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
      : w_(std::move(watched)), session_(session), timeout_(timeout), grace_(grace(timeout)),
        buffer_(sizeof(Header) + max_payload) {
    callers_.reserve(8);  // the caller's threads: steady-state waits allocate nothing
  }
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
  std::uint64_t session() const { return session_; }

  /// The caller's wait: until done() holds (true) or the synchronizer stops (false, also when it
  /// failed). The watchdog fails the synchronizer if it lasts the timeout (see the bound above).
  template <class Done>
  bool wait(Done&& done, const char* who, std::size_t index) {
    if (done()) return true;
    Caller me{clock::now(), who, index};
    {
      std::lock_guard lock(mutex_);
      callers_.push_back(&me);
    }
    const bool ok = w_.control.wait(done);
    std::lock_guard lock(mutex_);
    std::erase(callers_, &me);
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
  // The messages, on abort_tag: a header, then text (failed, verdict) or the ranks
  // the sender waits for as int32 (answer).
  enum class Kind : std::uint32_t { failed, query, answer, verdict };
  struct Header {
    std::uint64_t session = 0;
    Kind kind = Kind::failed;
    std::int32_t round = 0;  ///< which question an answer is for
  };
  static constexpr std::size_t max_payload = 4096;

  struct Caller {
    clock::time_point since;
    const char* who;
    std::size_t index;
  };
  /// What started a diagnosis: a PeerTimeout, or the caller's wait `who`(`index`).
  struct Trigger {
    std::exception_ptr error;
    const char* who = nullptr;
    std::size_t index = 0;
  };

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
    std::lock_guard lock(mutex_);
    if (diagnosed_ || w_.control.failed()) return std::nullopt;
    if (timed_out_) return Trigger{timed_out_};
    const auto oldest = std::ranges::min_element(callers_, {}, &Caller::since);
    if (oldest == callers_.end() || clock::now() - (*oldest)->since < timeout_) return std::nullopt;
    return Trigger{nullptr, (*oldest)->who, (*oldest)->index};
  }

  void diagnose(const Trigger& trigger) {
    {
      std::lock_guard lock(mutex_);
      diagnosed_ = true;
    }
    ++round_;
    answers_.assign(static_cast<std::size_t>(size()), std::nullopt);
    diagnosing_ = true;
    broadcast(Kind::query, round_, {});
    const auto everyone = [&] {
      for (int p = 0; p < size(); ++p)
        if (p != rank() && !answers_[p]) return false;
      return true;
    };
    for (const auto deadline = clock::now() + grace_;
         !everyone() && !w_.control.failed() && !quitting() && clock::now() < deadline;) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    diagnosing_ = false;
    if (w_.control.failed()) return;  // a peer's verdict or failure came first, or an error of this rank
    const std::vector<int> mine = waited_for();
    finish(verdict(detail::blame(rank(), mine, answers_), mine, trigger), Kind::verdict, true);
  }

  /// The error a diagnosis ends with.
  std::exception_ptr verdict(const detail::Blame& b, const std::vector<int>& mine, const Trigger& trigger) const {
    using K = detail::Blame::Kind;
    const std::string me = w_.t.describe(), waited = " waited " + std::to_string(timeout_.count()) + " ms";
    if (b.kind == K::silent) {
      const bool one = b.ranks.size() == 1;
      std::string why = b.waiters.empty() ? "" : detail::ranks_text(b.waiters) + (b.waiters.size() == 1 ? " waits" : " wait") + " for " + (one ? "it" : "them") + ", and ";
      why += (one ? "it" : "they") + std::string(" did not answer within ") + std::to_string(grace_.count()) + " ms";
      const auto silent = std::ranges::count_if(answers_, [](const auto& a) { return !a; }) - 1;  // less this rank's slot
      if (size() > 2 && silent == size() - 1) why += "; no peer answered: the network of this rank may be down";
      return std::make_exception_ptr(PeerError(
          "gradsync: " + detail::ranks_text(b.ranks) + " stopped answering: " + (one ? "it" : "they") + " died or " +
          (one ? "its" : "their") + " network is down (" + why + "; seen from rank " + std::to_string(rank()) + " of " +
          std::to_string(size()) + "): restart from the last checkpoint once that node is back, or without it"));
    }
    if (b.kind == K::idle) {
      const int r = b.ranks.front();
      return std::make_exception_ptr(PeerTimeout(
          "gradsync: " + me + waited + " for rank " + std::to_string(r) +
              (b.waiters.empty() ? "" : " (through " + detail::ranks_text(b.waiters) + ")") +
              ", which answers but waits for no peer: it stopped handing over gradients (its training loop is stuck, "
              "or slower than Options::timeout: raise it if that rank is only slow)",
          r));
    }
    if (trigger.error) return trigger.error;
    if (!mine.empty())
      return std::make_exception_ptr(PeerTimeout(
          "gradsync: " + me + waited + " for rank " + std::to_string(mine.front()) +
              ", and every rank answers that it waits for another: a link or a rank is slower than Options::timeout "
              "(raise it if so), or the ranks hand over different layers",
          mine.front()));
    return std::make_exception_ptr(PeerError(
        "gradsync: " + std::string(trigger.who) + "(" + std::to_string(trigger.index) + "): not aggregated after " +
        std::to_string(timeout_.count()) + " ms on " + me + ", and this rank waits for no peer: a peer did not hand "
        "over this layer or is slower than Options::timeout; raise it if a peer is only slow"));
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
    if (tell) broadcast(kind, 0, std::as_bytes(std::span(text.data(), std::min(text.size(), max_payload))));
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

  // ---- messages ----
  void send(int peer, Kind kind, std::int32_t round, std::span<const std::byte> payload) {
    std::vector<std::byte> m(sizeof(Header) + payload.size());
    const Header h{session_, kind, round};
    std::memcpy(m.data(), &h, sizeof h);
    if (!payload.empty()) std::memcpy(m.data() + sizeof h, payload.data(), payload.size());
    try {
      w_.user.send(peer, abort_tag, m);
    } catch (...) {  // best effort: the peer may be gone
    }
  }
  void broadcast(Kind kind, std::int32_t round, std::span<const std::byte> payload) {
    for (int p = 0; p < size(); ++p)
      if (p != rank()) send(p, kind, round, payload);
  }

  /// Takes in every peer's messages that have come.
  void poll() {
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      try {
        while (const auto got = w_.user.try_recv(p, abort_tag, buffer_)) handle(p, *got);
      } catch (...) {  // a peer's link failed: its silence speaks for it
      }
    }
  }
  void handle(int peer, std::size_t bytes) {
    Header h;
    if (bytes < sizeof h) return;
    std::memcpy(&h, buffer_.data(), sizeof h);
    if (h.session != session_) return;  // left over from an earlier synchronizer
    const auto payload = std::span(buffer_).subspan(sizeof h, bytes - sizeof h);
    const std::string text(reinterpret_cast<const char*>(payload.data()), payload.size());
    switch (h.kind) {
      case Kind::failed:
        finish(std::make_exception_ptr(PeerError("gradsync: rank " + std::to_string(peer) + " failed: " + text)),
               Kind::failed, false);
        break;
      case Kind::verdict:
        finish(std::make_exception_ptr(PeerError(text)), Kind::verdict, false);
        break;
      case Kind::query:
        answer(peer, h.round);
        break;
      case Kind::answer:
        if (diagnosing_ && h.round == round_) {
          std::vector<int> peers(payload.size() / sizeof(std::int32_t));
          if (!peers.empty()) std::memcpy(peers.data(), payload.data(), peers.size() * sizeof(std::int32_t));
          answers_[peer] = std::move(peers);
        }
        break;
    }
  }
  /// Tells `peer` whom this rank waits for, or, once it failed, with what.
  void answer(int peer, std::int32_t round) {
    std::optional<std::pair<Kind, std::string>> failure;
    {
      std::lock_guard lock(mutex_);
      failure = failure_;
    }
    if (failure) {
      const std::string& text = failure->second;
      send(peer, failure->first, round, std::as_bytes(std::span(text.data(), std::min(text.size(), max_payload))));
      return;
    }
    std::vector<std::int32_t> peers;
    for (int p : waited_for()) peers.push_back(p);
    peers.resize(std::min(peers.size(), max_payload / sizeof(std::int32_t)));
    send(peer, Kind::answer, round, std::as_bytes(std::span(peers)));
  }

  Watched w_;
  std::uint64_t session_;
  std::chrono::milliseconds timeout_, grace_;

  mutable std::mutex mutex_;  // guards the members up to thread_
  std::condition_variable woken_;
  std::vector<Caller*> callers_;             // the caller's waits in progress
  std::exception_ptr timed_out_;             // the first PeerTimeout reported
  std::vector<transport::Wait> suspects_;    // the peers of the PeerTimeouts reported
  std::optional<std::pair<Kind, std::string>> failure_;  // set once this rank failed
  bool diagnosed_ = false, quit_ = false;
  std::thread thread_;

  // The watchdog's thread only.
  std::vector<std::byte> buffer_;
  std::int32_t round_ = 0;
  bool diagnosing_ = false;
  std::vector<std::optional<std::vector<int>>> answers_;
};

}  // namespace gradsync::schedule
