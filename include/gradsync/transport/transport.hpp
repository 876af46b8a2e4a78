#pragma once
/// Transport: who talks to whom. A runtime object (InProcess, Mpi, Nccl, Throttled<...>) giving
/// tagged point-to-point messages between the ranks of one job. Messages between one pair of
/// ranks with one tag arrive in the order they were sent.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "../detail/backoff.hpp"

namespace gradsync::transport {

using Tag = std::uint32_t;

/// A receive the caller waits on until its message comes (see Transport::post_recv).
struct PostedRecv {
  int src = 0;
  Tag tag = 0;
  std::span<std::byte> out;
  std::uint64_t handle = 0;  ///< the transport's own; 0 while nothing is posted
};

/// A block of tags one layer of gradsync picks its control messages' tags from.
struct TagRange {
  Tag first;
  Tag count;
  /// The range's i-th tag; a compile error when i is outside the range.
  consteval Tag at(Tag i) const {
    if (i >= count) throw "gradsync: a tag outside its layer's range: take a free one, or widen the range";
    return first + i;
  }
  constexpr Tag end() const { return first + count; }
};

/// Every tag on a transport, in one place. Tags at or above reserved_tags carry gradsync's own
/// control traffic, in one range per layer; each layer picks its tags from its range in its own
/// header (transport/tags.hpp, collective/tags.hpp, schedule/tags.hpp). Below them, tags a
/// Synchronizer never reads, so programs may use them on a transport it shares: the tools' and
/// adapters' (sim's link tuning, the PyTorch adapter's exchange) and the application's own; below
/// those, units (a unit's index is its tag, from 0).
inline constexpr Tag reserved_tags = 0x7fff0000u;
inline constexpr TagRange transport_tags{reserved_tags, 16};        ///< transports' own setup
inline constexpr TagRange collective_tags{transport_tags.end(), 16};  ///< collectives' own setup
inline constexpr TagRange schedule_tags{collective_tags.end(), 16};   ///< the schedule's protocol
inline constexpr Tag last_reserved_tag = schedule_tags.end() - 1;     ///< a transport must carry tags up to this
inline constexpr TagRange tool_tags{reserved_tags - 16, 16};          ///< gradsync's tools and adapters
inline constexpr TagRange application_tags{tool_tags.first - 1024, 1024};  ///< a program's own messages
inline constexpr Tag unit_tags_end = application_tags.first;  ///< units are tagged 0 .. unit_tags_end - 1

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// A short description for error messages ("in-process rank 2 of 4").
  virtual std::string describe() const = 0;
  /// How long recv waits for a peer before it gives up.
  virtual std::chrono::milliseconds timeout() const = 0;
  /// Whether `p` points into GPU memory (transport::Nccl asks CUDA); host transports say no.
  virtual bool device_memory(const void* p) const {
    (void)p;
    return false;
  }

  /// Sends `data` to `dst`. `data` may be reused as soon as send returns.
  virtual void send(int dst, Tag tag, std::span<const std::byte> data) = 0;

  /// A send started by send_async; 0 is one that already finished.
  using SendId = std::uint64_t;
  /// Starts sending `data` to `dst` without copying it: `data` must stay alive and unchanged
  /// until wait_sent(id) returns (the ring's fp32 segments go out straight from the unit).
  /// Transports that copy anyway keep this default: send, and nothing to wait for.
  virtual SendId send_async(int dst, Tag tag, std::span<const std::byte> data) {
    send(dst, tag, data);
    return 0;
  }
  /// Blocks until send `id` no longer reads its bytes; a PeerError after timeout().
  virtual void wait_sent(SendId id) { (void)id; }
  /// True once send `id` no longer reads its bytes (then the id is spent); never waits, so a
  /// caller can give up on a peer that failed. Transports whose send_async really is
  /// asynchronous override it; this default waits (correct, but not interruptible).
  virtual bool test_sent(SendId id) {
    wait_sent(id);
    return true;
  }
  /// Waits at most `wait` for send `id`: true once it no longer reads its bytes (then the id is
  /// spent). This default polls test_sent; a transport that can wait without polling overrides it.
  virtual bool wait_sent_for(SendId id, std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    gradsync::detail::Backoff backoff;
    for (;;) {
      if (test_sent(id)) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      backoff.pause();
    }
  }
  /// Receives the next message from `src` with `tag` into `out`, waiting at most `wait`.
  /// Returns its size, or nothing if none arrived in time. A message longer than `out` throws
  /// WireError (it is consumed, never written out of bounds).
  virtual std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                              std::chrono::milliseconds wait) = 0;

  /// Receives the next message from `src` with `tag` if one has arrived; never waits for one to
  /// come and never posts a receive it would have to cancel, so a thread can poll many (src, tag)
  /// pairs at once (the parameter server's thread). Transports that post receives override it.
  virtual std::optional<std::size_t> try_recv(int src, Tag tag, std::span<std::byte> out) {
    return recv_for(src, tag, out, std::chrono::milliseconds(0));
  }

  /// Starts a receive into `out` for a caller that waits for it (wait_recv) until it comes or the
  /// caller gives up (unpost_recv): `out` is the transport's until then. A transport that can
  /// (Mpi) posts it at once, so the payload lands in `out` as it arrives rather than waiting as
  /// an unexpected message to be copied later; this default posts nothing and wait_recv receives.
  virtual PostedRecv post_recv(int src, Tag tag, std::span<std::byte> out) {
    check_peer(src);
    return {src, tag, out};
  }
  /// Waits at most `wait` for a posted receive; its size once it came (then it is over).
  virtual std::optional<std::size_t> wait_recv(PostedRecv& r, std::chrono::milliseconds wait) {
    return recv_for(r.src, r.tag, r.out, wait);
  }
  /// Takes back a posted receive that did not come (its caller stops waiting); `out` is the
  /// caller's again.
  virtual void unpost_recv(PostedRecv& r) noexcept { (void)r; }

  /// Receives the next message from `src` with `tag`, waiting up to the transport's timeout (a
  /// posted receive: the data path's); a silent peer becomes a PeerError naming it.
  std::size_t recv(int src, Tag tag, std::span<std::byte> out) {
    struct Posted {  // taken back on every way out but its arrival
      Transport& t;
      PostedRecv r;
      ~Posted() { t.unpost_recv(r); }
    } posted{*this, post_recv(src, tag, out)};
    if (auto n = wait_recv(posted.r, timeout())) return *n;
    throw silent_peer(src, tag);
  }
  /// The error for rank `peer` sending nothing with `tag` (or, `taking`, not taking a message of
  /// ours) within timeout().
  PeerTimeout silent_peer(int peer, Tag tag, bool taking = false) const {
    return PeerTimeout("gradsync: " + describe() + " waited " + std::to_string(timeout().count()) +
                           " ms for rank " + std::to_string(peer) + (taking ? " to take a message" : "") +
                           " (tag " + std::to_string(tag) +
                           "): that rank died, stopped communicating, or is too slow; "
                           "raise Options::timeout if it is only slow",
                       peer);
  }
  /// The transport of concrete type T behind this one: itself, or what a decorator (Throttled,
  /// transport::Cancellable, a user's wrapper) wraps; null if there is none. Collectives that
  /// hand units to a vendor library (MPI's or NCCL's own all-reduce) find their transport so.
  template <class T>
  T* native() {
    if (auto* self = dynamic_cast<T*>(this)) return self;
    Transport* inner = wrapped();
    return inner ? inner->native<T>() : nullptr;
  }
  /// Decorators return the transport they wrap (see native()); others nothing.
  virtual Transport* wrapped() { return nullptr; }

 protected:
  void check_peer(int peer) const {
    if (peer < 0 || peer >= size())
      throw UsageError("gradsync: " + describe() + ": peer rank " + std::to_string(peer) + " out of range");
  }
};

}  // namespace gradsync::transport
