#pragma once
/// Throttled<T>: a transport decorator that emulates slow links (1-30 Gbit/s), the way the P3
/// paper shaped its cluster with `tc`: every directed link (this rank -> peer) is a token bucket
/// of `gbit` Gbit/s with a `burst` allowance, and every message arrives `latency` after it left.
///
/// \code
///   gradsync::transport::InProcessGroup group(4);
///   gradsync::transport::Throttled<> slow(group.rank(r), gradsync::transport::Link::parse("1gbit"));
///   gradsync::AnySynchronizer sync(slow, layout);       // or Throttled<Mpi> over an Mpi transport
/// \endcode
///
/// A send books the link like a NIC queue: the message leaves when the messages before it on that
/// link have left (serialization delay = bytes / rate) and arrives `latency` later. The send itself
/// returns at once (buffered, as every Transport send); a 16-byte stamp message with the arrival
/// time (steady clock, shared by all processes of one machine) goes just ahead of the data, and
/// the receiver holds the data until then — one sleep per message, on the side that needs the
/// data, and no copies besides the inner transport's own (a copy costs CPU that a real NIC would
/// not, and would slow codecs' compute next to the emulated wire). The stamp and its data stay
/// paired because messages of one peer and tag come from one thread at a time (one unit, one
/// executor), as everywhere in gradsync. Links are full duplex. By
/// default each peer has its own link (a rank sending to several peers uses each at the full
/// rate); with `shared_nic` all of a rank's outgoing traffic shares one bucket, like tc on a
/// NIC. Every rank of a job must wrap its transport the same way.
///
/// \tparam T  the wrapped transport (any Transport; the default erases its type)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "link.hpp"
#include "transport.hpp"

namespace gradsync::transport {

template <class T = Transport>
class Throttled final : public Transport {
 public:
  /// \param inner  the transport that moves the bytes (must outlive this object)
  /// \param link   the emulated link to every peer
  Throttled(T& inner, Link link)
      : inner_(inner), link_(link), gbit_(link.gbit), latency_(link.latency.count()),
        links_(static_cast<std::size_t>(inner.size())) {
    if (!(link.gbit > 0)) throw UsageError("gradsync: Throttled: link bandwidth must be positive");
    held_.reserve(64);
  }

  T& inner() { return inner_; }
  const Link& link() const { return link_; }  ///< as constructed (change() moves rate and latency)
  /// A network that changes under a running job: messages sent from now on go at `to`'s rate and
  /// latency (its burst and NIC sharing stay as constructed); those already booked keep their times.
  void change(const Link& to) {
    if (!(to.gbit > 0)) throw UsageError("gradsync: Throttled: link bandwidth must be positive");
    gbit_.store(to.gbit);
    latency_.store(to.latency.count());
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  std::string describe() const override {
    return inner_.describe() + " throttled to " + std::to_string(gbit_.load()) + " Gbit/s" +
           (link_.shared_nic ? " per rank" : " per link");
  }

  void send(int dst, Tag tag, std::span<const std::byte> data) override {
    send_stamp(dst, tag, data.size());
    inner_.send(dst, tag, data);
  }
  SendId send_async(int dst, Tag tag, std::span<const std::byte> data) override {
    send_stamp(dst, tag, data.size());
    return inner_.send_async(dst, tag, data);
  }
  void wait_sent(SendId id) override { inner_.wait_sent(id); }
  bool test_sent(SendId id) override { return inner_.test_sent(id); }
  bool wait_sent_for(SendId id, std::chrono::milliseconds wait) override { return inner_.wait_sent_for(id, wait); }
  Transport* wrapped() override { return &inner_; }

  std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    const auto arrival = stamp(src, tag, [&](std::span<std::byte> b) { return inner_.recv_for(src, tag, b, wait); });
    if (!arrival) return std::nullopt;
    const std::size_t n = inner_.recv(src, tag, out);  // sent right behind its stamp
    std::this_thread::sleep_until(*arrival);
    return n;
  }

  /// A message counts as arrived at its stamped time: before that its stamp is kept here and the
  /// data left in the inner transport, so a polling thread is never put to sleep by one message.
  std::optional<std::size_t> try_recv(int src, Tag tag, std::span<std::byte> out) override {
    const auto arrival = stamp(src, tag, [&](std::span<std::byte> b) { return inner_.try_recv(src, tag, b); });
    if (!arrival) return std::nullopt;
    if (clock::now() < *arrival) {
      std::lock_guard lock(held_mutex_);
      held_.push_back({src, tag, *arrival});
      return std::nullopt;
    }
    return inner_.recv(src, tag, out);
  }

 private:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint64_t stamp_magic = 0x6773746872746c31ull;  // "gsthrtl1"
  struct Stamp {
    std::uint64_t magic;
    std::int64_t arrival;  // steady-clock ticks
  };

  struct Held {
    int src;
    Tag tag;
    clock::time_point arrival;
  };

  /// The arrival time of the next message from `src` with `tag`: a stamp held by try_recv, else
  /// one received with `receive`; nothing if none came.
  template <class Receive>
  std::optional<clock::time_point> stamp(int src, Tag tag, Receive&& receive) {
    {
      std::lock_guard lock(held_mutex_);
      const auto it = std::ranges::find_if(held_, [&](const Held& h) { return h.src == src && h.tag == tag; });
      if (it != held_.end()) {
        const clock::time_point arrival = it->arrival;
        held_.erase(it);
        return arrival;
      }
    }
    Stamp st{};
    std::optional<std::size_t> got;
    try {
      got = receive(std::as_writable_bytes(std::span(&st, 1)));
    } catch (const WireError&) {  // longer than a stamp: data sent without one
      got = 0;
    }
    if (!got) return std::nullopt;
    if (*got != sizeof st || st.magic != stamp_magic)
      throw WireError("gradsync: " + describe() + ": message from rank " + std::to_string(src) +
                      " lacks the arrival stamp: wrap every rank's transport in Throttled, or none");
    return clock::time_point(clock::duration(st.arrival));
  }

  struct Bucket {
    std::mutex mutex;
    clock::time_point free_at{};  // when the link has carried everything already sent
  };

  /// Books the link for a message of `bytes` and sends its stamp ahead of it.
  void send_stamp(int dst, Tag tag, std::size_t bytes) {
    check_peer(dst);
    const Stamp stamp{stamp_magic, transmit(dst, bytes).time_since_epoch().count()};
    inner_.send(dst, tag, std::as_bytes(std::span(&stamp, 1)));
  }

  /// Books the link for `bytes`; returns when they will have arrived.
  clock::time_point transmit(int dst, std::size_t bytes) {
    const double bits_per_second = gbit_.load() * 1e9;
    const auto wire = std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) * 8.0 / bits_per_second));
    const auto burst = std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double>(static_cast<double>(link_.burst) * 8.0 / bits_per_second));
    clock::time_point left;
    {
      Bucket& b = links_[link_.shared_nic ? 0 : static_cast<std::size_t>(dst)];
      std::lock_guard lock(b.mutex);
      const auto now = clock::now();
      b.free_at = std::max(b.free_at, now - burst) + wire;  // an idle link saves up to `burst`
      left = std::max(b.free_at, now);  // a message within the saved burst leaves at once
    }
    return left + std::chrono::microseconds(latency_.load());
  }

  T& inner_;
  Link link_;
  std::atomic<double> gbit_;
  std::atomic<std::chrono::microseconds::rep> latency_;
  std::vector<Bucket> links_;
  std::mutex held_mutex_;
  std::vector<Held> held_;  // stamps try_recv read before their message's arrival time
};

}  // namespace gradsync::transport
