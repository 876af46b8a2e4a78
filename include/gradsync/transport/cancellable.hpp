#pragma once
/// Cancellable: a decorator that gives every wait on another transport one timeout and a way out.
/// The Synchronizer talks to its peers through one, so that
///  - `Options::timeout` is the only timeout that applies (the wrapped transport's own is not
///    reached: waits are cut into short slices), and a silent peer's PeerTimeout names it;
///  - cancel() ends every wait in progress and to come at once (within a slice) with the reason
///    given, so a rank that failed, or that learned a peer failed, stops its threads at once
///    instead of waiting a timeout in each;
///  - waits() lists the receives and sends in progress: whom this rank waits for, and since when
///    (schedule::Watchdog asks when it diagnoses a timeout).
///
/// \code
///   gradsync::transport::Cancellable c(mpi, std::chrono::seconds(30));
///   c.recv(1, tag, buffer);                 // PeerError after 30 s, whatever mpi.timeout() says
///   c.cancel(std::make_exception_ptr(gradsync::PeerError("rank 1 failed")));  // from any thread
/// \endcode
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <vector>

#include "transport.hpp"
#include "wait.hpp"

namespace gradsync::transport {

class Cancellable final : public Transport {
 public:
  /// How long one slice of a wait lasts: the delay between cancel() and a waiter noticing it.
  static constexpr std::chrono::milliseconds slice{20};
  /// Sends in flight and waits in progress held without allocating (a few per executor).
  static constexpr std::size_t reserved = 64;

  Cancellable(Transport& inner, std::chrono::milliseconds timeout) : inner_(inner), timeout_(timeout) {
    if (timeout.count() <= 0) throw UsageError("gradsync: the timeout must be positive (Options::timeout)");
    // How many threads wait at once depends on timing: grown later, these would allocate in
    // steady state (a loaded machine has more waits at once than warm-up had).
    in_flight_.reserve(reserved);
    waits_.reserve(reserved);
  }

  /// Ends every wait in progress and to come by rethrowing `why`. Idempotent: the first reason stays.
  void cancel(std::exception_ptr why) {
    std::lock_guard lock(mutex_);
    if (why_) return;
    why_ = std::move(why);
    cancelled_.store(true);
  }
  bool cancelled() const { return cancelled_.load(); }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string describe() const override { return inner_.describe(); }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  bool device_memory(const void* p) const override { return inner_.device_memory(p); }
  Transport* wrapped() override { return &inner_; }

  void send(int dst, Tag tag, std::span<const std::byte> data) override {
    throw_if_cancelled();
    inner_.send(dst, tag, data);
  }
  SendId send_async(int dst, Tag tag, std::span<const std::byte> data) override {
    throw_if_cancelled();
    const SendId id = inner_.send_async(dst, tag, data);
    if (id == 0) return id;  // done already (a transport that copies)
    std::lock_guard lock(mutex_);
    in_flight_.push_back({id, dst, tag});
    return id;
  }
  void wait_sent(SendId id) override {
    const auto sent = in_slices(destination(id), timeout_, [&](std::chrono::milliseconds w) {
      return inner_.wait_sent_for(id, w) ? std::optional<std::size_t>(0) : std::nullopt;
    });
    const Sent s = forget(id);
    if (!sent) throw silent_peer(s.dst, s.tag, true);
  }
  bool test_sent(SendId id) override { return inner_.test_sent(id); }
  std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    return in_slices(src, wait, [&](std::chrono::milliseconds w) { return inner_.recv_for(src, tag, out, w); });
  }
  PostedRecv post_recv(int src, Tag tag, std::span<std::byte> out) override {
    throw_if_cancelled();
    return inner_.post_recv(src, tag, out);
  }
  std::optional<std::size_t> wait_recv(PostedRecv& r, std::chrono::milliseconds wait) override {
    return in_slices(r.src, wait, [&](std::chrono::milliseconds w) { return inner_.wait_recv(r, w); });
  }
  void unpost_recv(PostedRecv& r) noexcept override { inner_.unpost_recv(r); }
  std::optional<std::size_t> try_recv(int src, Tag tag, std::span<std::byte> out) override {
    throw_if_cancelled();
    return inner_.try_recv(src, tag, out);
  }

  /// Calls each(Wait) for every receive and send in progress (under a lock: keep it short).
  template <class F>
  void waits(F&& each) const {
    std::lock_guard lock(mutex_);
    for (const Registered& w : waits_) each(Wait{w.peer, w.since});
  }

 private:
  struct Registered {
    const void* id;
    int peer;
    std::chrono::steady_clock::time_point since;
  };
  /// Registers a receive or send in progress in waits_ for its lifetime.
  class Waiting {
   public:
    Waiting(Cancellable& c, int peer) : c_(c) {
      std::lock_guard lock(c_.mutex_);
      c_.waits_.push_back({this, peer, std::chrono::steady_clock::now()});
    }
    ~Waiting() {
      std::lock_guard lock(c_.mutex_);
      const auto it = std::ranges::find(c_.waits_, static_cast<const void*>(this), &Registered::id);
      *it = c_.waits_.back();
      c_.waits_.pop_back();
    }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Cancellable& c_;
  };
  struct Sent {
    SendId id;
    int dst;
    Tag tag;
  };
  /// The peer send `id` goes to (-1 if it is not in flight).
  int destination(SendId id) const {
    std::lock_guard lock(mutex_);
    const auto it = std::ranges::find(in_flight_, id, &Sent::id);
    return it == in_flight_.end() ? -1 : it->dst;
  }
  /// Drops send `id` from in_flight_ and returns what it was (for the error naming its peer).
  Sent forget(SendId id) {
    std::lock_guard lock(mutex_);
    const auto it = std::ranges::find(in_flight_, id, &Sent::id);
    if (it == in_flight_.end()) return {id, -1, 0};
    const Sent s = *it;
    *it = in_flight_.back();
    in_flight_.pop_back();
    return s;
  }
  /// Waits up to `wait` for a message from `src` by calling receive(w) with waits of a slice at
  /// most, so a cancel() ends it within a slice.
  template <class Receive>
  std::optional<std::size_t> in_slices(int src, std::chrono::milliseconds wait, Receive&& receive) {
    const Waiting waiting(*this, src);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      throw_if_cancelled();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (auto n = receive(std::clamp(left, std::chrono::milliseconds(0), slice))) return n;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    }
  }
  void throw_if_cancelled() const {
    if (!cancelled_.load()) return;
    std::lock_guard lock(mutex_);
    std::rethrow_exception(why_);
  }

  Transport& inner_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;  // guards why_, in_flight_ and waits_
  std::exception_ptr why_;
  std::vector<Sent> in_flight_;  // send_async's sends not yet waited for (a few: the ring's window)
  std::vector<Registered> waits_;  // receives and sends in progress (one per thread at most)
  std::atomic<bool> cancelled_{false};
};

}  // namespace gradsync::transport
