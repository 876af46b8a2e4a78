#pragma once
/// Server: the ParameterServer's server role on its own thread, with its own priority lanes
/// (P3, section 4.2). An executor on the serving rank hands a unit over (a Served) and waits; the
/// server thread collects the workers' pushes of every unit it holds with Transport::try_recv, so
/// it never blocks on one unit while another could finish, adds them in rank order (sums stay
/// bit-reproducible whatever the arrival order) and, among units whose pushes are all in, serves
/// the most urgent first. Blocking on one unit could deadlock: its pushers' executors may all wait
/// for broadcasts that this server has not sent yet.
///
/// \code
///   collective::Server server(transport, lane_capacities, units);  // ParameterServer::start makes one
///   server.serve(served_unit);                                      // from an executor: waits until served
/// \endcode
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../detail/backoff.hpp"
#include "../priority/lanes.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"

namespace gradsync::collective {

/// One unit at its server: the serving rank's own gradient, to which the pushes are added.
class Served {
 public:
  Served(transport::Transport& t, transport::Tag tag, std::uint32_t key) : t_(t), tag_(tag), key_(key) {}
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  virtual ~Served() = default;

  /// Takes whatever has arrived, waiting for nothing; true once all the unit needs is in. This
  /// default adds every push in rank order (sums stay bit-reproducible).
  virtual bool poll() {
    for (; next_ < t_.size(); ++next_) {
      if (next_ == t_.rank()) continue;
      const auto got = t_.try_recv(next_, tag_, buffer());
      if (!got) return false;
      add(*got);
      progressed();
    }
    return true;
  }
  /// poll() until all pushes are in; a PeerError naming the silent rank after the timeout.
  void collect() {
    gradsync::detail::Backoff backoff;
    while (!poll()) {
      if (stalled()) throw t_.silent_peer(missing(), tag_);
      backoff.pause();
    }
  }
  /// The mean (or sum) of all pushes, encoded and broadcast to the workers.
  virtual void serve() = 0;

 protected:
  virtual std::span<std::byte> buffer() { return {}; }  // where the next push is received (default poll)
  virtual void add(std::size_t) {}                      // decodes it and adds it (default poll)
  /// The rank a stalled unit waits for, for the error.
  virtual int missing() const { return next_; }
  /// Something arrived: the unit is not stalled.
  void progressed() {
    since_ = std::chrono::steady_clock::now();
    ++progress_;
  }

  transport::Transport& t_;
  transport::Tag tag_;

 private:
  friend class Server;
  bool stalled() const { return std::chrono::steady_clock::now() - since_ > t_.timeout(); }

  std::uint32_t key_;
  int next_ = 0;  // the next rank whose push to add (default poll)
  std::uint64_t progress_ = 0;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();  // last progress
  bool done_ = false;  // guarded by the Server's mutex
  std::exception_ptr error_;
};

class Server {
 public:
  /// capacity[k]: how many units have priority key k; `units`: how many units (tags) there are.
  Server(transport::Transport& t, const std::vector<std::size_t>& capacity, std::size_t units)
      : t_(t), ready_(capacity), by_unit_(units, nullptr) {
    // Room for every unit at once: how many are held together depends on timing, and growing
    // these later would allocate in steady state (a loaded machine holds more than warm-up did).
    pending_.reserve(units);
    incoming_.reserve(units);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() { stop(); }

  /// Hands `s` to the server thread (started on first use) and waits until it is served.
  /// Rethrows the server's error (a silent worker, a bad push, a stopped server).
  void serve(Served& s) {
    std::unique_lock lock(mutex_);
    if (!error_ && !stop_) {
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
      incoming_.push_back(&s);
      cv_.notify_all();
      cv_.wait(lock, [&] { return s.done_ || exited_; });  // after exited_ the thread no longer touches s
    }
    if (!s.done_) std::rethrow_exception(error_ ? error_ : stopped());
    if (s.error_) std::rethrow_exception(s.error_);
  }

  /// The worker the longest-stalled unit waits for, and since its last progress (peer -1: none).
  transport::Wait stall() const {
    const int peer = stuck_on_.load();
    return {peer, std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(stuck_since_.load()))};
  }

  /// Fails the units still held and joins the thread. Idempotent; from the owner's thread only
  /// (after a failure the thread ends by itself: its transport is cancelled).
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static std::exception_ptr stopped() {
    return std::make_exception_ptr(UsageError("gradsync: the parameter server stopped (Synchronizer destroyed)"));
  }

  void loop() {
    try {
      gradsync::detail::Backoff backoff;
      for (;;) {
        {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !pending_.empty() || held_ > pending_.size(); });
          if (stop_) break;
          pending_.insert(pending_.end(), incoming_.begin(), incoming_.end());
          held_ += incoming_.size();
          incoming_.clear();
        }
        bool progressed = false;
        const Served* stuck = nullptr;  // the pending unit without progress the longest
        for (std::size_t i = 0; i < pending_.size();) {
          Served& s = *pending_[i];
          const std::uint64_t before = s.progress_;
          const bool in = s.poll();
          progressed |= s.progress_ != before;
          if (!in) {
            if (s.stalled()) throw t_.silent_peer(s.missing(), s.tag_);
            if (!stuck || s.since_ < stuck->since_) stuck = &s;
            ++i;
            continue;
          }
          by_unit_[s.tag_] = &s;
          ready_.push(s.key_, s.tag_);
          pending_[i] = pending_.back();
          pending_.pop_back();
        }
        if (stuck) stuck_since_.store(stuck->since_.time_since_epoch().count());
        stuck_on_.store(stuck ? stuck->missing() : -1);
        if (const auto u = ready_.try_pop()) {
          progressed = true;
          Served& s = *by_unit_[*u];
          try {
            s.serve();
          } catch (...) {
            s.error_ = std::current_exception();
          }
          finish(s);
        }
        if (progressed) backoff = {};
        else backoff.pause();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    {  // wake every executor still waiting; each rethrows the error (or "stopped")
      std::lock_guard lock(mutex_);
      exited_ = true;
    }
    cv_.notify_all();
  }

  void finish(Served& s) {
    {
      std::lock_guard lock(mutex_);
      s.done_ = true;
      --held_;
    }
    cv_.notify_all();
  }

  transport::Transport& t_;
  priority::Lanes ready_;  // units whose pushes are all in, by priority key
  std::vector<Served*> by_unit_;   // tag -> its Served while it is ready
  std::vector<Served*> pending_;   // units still collecting pushes (server thread only)

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Served*> incoming_;  // handed over, not yet seen by the server thread (guarded)
  std::size_t held_ = 0;           // units handed over and not yet finished (guarded)
  bool stop_ = false, exited_ = false;
  std::exception_ptr error_;
  std::thread thread_;
  std::atomic<int> stuck_on_{-1};  // stall(): the longest-stalled unit's missing rank, and since when
  std::atomic<std::chrono::steady_clock::rep> stuck_since_{0};
};

}  // namespace gradsync::collective
