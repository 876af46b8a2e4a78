#pragma once
/// Ring: reduce-scatter then all-gather around a ring, each rank sending 2(N-1)/N of the unit —
/// bandwidth-optimal for large units.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::Ring> sync{transport, layout};
/// \endcode
///
/// The unit is cut into N chunks (at multiples of the codec's bucket, codec::Traits::grain), each chunk
/// into K segments of about `segment_bytes` on the wire.
///
/// fp32 (codec::Identity): the classic ring. At step s rank r sends chunk r-s to its right
/// neighbour and adds chunk r-s-1 from its left one; after N-1 steps rank r owns chunk r+1 fully
/// reduced, scales it for the mean and starts the all-gather with it. The chunks travel as raw
/// floats, sent straight from the unit (Transport::send_async: no copy) and received by the
/// all-gather straight into it.
///
/// Every other codec (the lossy ones): a ring re-encoding partial sums would quantize an element N-1 times (the
/// variance of a stochastic codec growing with N, and a biased codec's error uncorrected), so the
/// reduce-scatter goes straight to each chunk's owner instead: rank r encodes chunk i of its own
/// gradient and sends it to rank i, which decodes and adds the N-1 pushes to its own chunk in rank
/// order. The owner encodes the aggregate once and the all-gather forwards those bytes around the
/// ring verbatim, so every rank decodes identical bytes. Each rank still sends 2(N-1)/N of the
/// unit; a lossy codec touches an element exactly twice (the study's reduce-and-broadcast does
/// the same): once on its rank, once as part of its owner's aggregate, both with error feedback
/// when the codec keeps a residual (collective/wire.hpp).
///
/// fp32 on 2 ranks: the two steps are one exchange. Each rank sends its whole unit and adds the
/// other's: the same bytes on the wire as the ring's (2(N-1)/N of the unit is all of it), the same
/// sum bit for bit (x + y == y + x: each rank's chunk of the ring was also its own plus the
/// other's), and half the messages, one step of latency instead of two. (On 2 namespace nodes of
/// one 2-core machine VGG-11's P3 iteration did not change: benchmarks/e2e/results/2026-11-30-window-n2;
/// a real link's latency is what the step saves.) Its sends leave all at once, so a buffering
/// transport holds the whole unit per peer, not one chunk.
///
/// Pipelined: every message is one segment, and segment j of a step leaves as soon as segment j
/// of the step before has arrived, so codec work overlaps the transfer instead of adding to it
/// (alpha-beta: 2(N-1)(alpha + chunk/beta) plus the compute of one segment, not of the whole
/// unit). Transports buffer at most one chunk per unit and peer (the whole unit on 2 ranks).
#include <algorithm>
#include <exception>

#include "concept.hpp"
#include "partition.hpp"
#include "wire.hpp"

namespace gradsync::collective {

namespace detail {
/// The ring's copy-free sends still in flight, oldest first, at most `size` of them; the ids live
/// in a circular buffer kept in the Workspace (no allocation once it has grown). Unwinding from
/// an error leaves them to the transport rather than wait a timeout for each.
class SendWindow {
 public:
  SendWindow(transport::Transport& t, std::vector<transport::Transport::SendId>& ids, std::size_t size)
      : t_(t), ids_(ids), size_(std::max<std::size_t>(size, 1)) {
    if (ids_.size() < size_) ids_.resize(size_);
  }
  SendWindow(const SendWindow&) = delete;
  SendWindow& operator=(const SendWindow&) = delete;
  ~SendWindow() {
    if (std::uncaught_exceptions() == 0) drain();
  }
  /// Sends `data` without copying it, after the oldest send finished if the window is full.
  void send(int dst, transport::Tag tag, std::span<const std::byte> data) {
    if (count_ == size_) pop();
    ids_[(head_ + count_) % size_] = t_.send_async(dst, tag, data);
    ++count_;
  }
  /// Waits for every send still in flight.
  void drain() {
    while (count_ > 0) pop();
  }
  /// Waits for the oldest send still in flight (its bytes are the caller's again).
  void pop() {
    const transport::Transport::SendId id = ids_[head_];
    head_ = (head_ + 1) % size_;
    --count_;
    t_.wait_sent(id);
  }
  transport::Transport& t_;
  std::vector<transport::Transport::SendId>& ids_;
  std::size_t size_, head_ = 0, count_ = 0;
};

/// Extra receivers of a ring's all-gather messages: ranks first .. first+count-1 of `t`, which
/// need not be the ring's transport (Hierarchical's members, outside the leaders' ring).
struct Tee {
  transport::Transport* t = nullptr;
  int first = 0, count = 0;
};

/// The chunk rank r holds at all-gather step g (0: the one it reduced itself): chunk r+1 after
/// the classic ring's reduce-scatter, chunk r after the owners'.
inline int gathered(bool classic, int r, int g) { return r + (classic ? 1 : 0) - g; }
}  // namespace detail

struct Ring {
  /// Wire bytes per segment, about: big enough that each message's fixed cost (alpha, a thread
  /// wake-up) stays small next to its transfer, small enough that several segments per chunk keep
  /// the link busy. Counted on the wire, so a codec that compresses 4x sends 4x the elements.
  std::size_t segment_bytes = std::size_t{1} << 20;
  /// Units only through the codec (device codecs too).
  static constexpr Traits traits() { return {.through_codec = true}; }

  std::string_view name() const { return "ring"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    if constexpr (detail::raw_fp32<C>)
      if (t.size() == 2) {
        detail::Wire<C> w{t, codec, ws, job};
        return exchange(t, w, job, segment_bytes);
      }
    return run(t, codec, job, ws, {});
  }

  /// As run, and every all-gather message (the bytes that leave the unit identical everywhere)
  /// also goes to the ranks of `tee`, which take them with receive_gathered (Hierarchical's
  /// members receive what their leader's ring produced, with no further encode). Always the
  /// ring's steps, on 2 ranks too: a leader without members passes an empty tee.
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws, detail::Tee tee) const {
    const int n = t.size();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const detail::Partition<C> part(job.data, n, codec, segment_bytes);
    detail::Wire<C> w{t, codec, ws, job};
    if constexpr (detail::raw_fp32<C>) return classic(t, part, w, job, tee);
    else return owners(t, part, w, job, tee);
  }

  /// A tee'd rank's side of run(): receives from `src` every all-gather message of the ring rank
  /// `ring_rank` of `ring_ranks` into its place in job.data.
  template <codec::Codec C>
  void receive_gathered(transport::Transport& t, const C& codec, Job& job, Workspace& ws, int src, int ring_rank,
                        int ring_ranks) const {
    const detail::Partition<C> part(job.data, ring_ranks, codec, segment_bytes);
    detail::Wire<C> w{t, codec, ws, job};
    for (int g = 0; g < ring_ranks; ++g)
      for (std::size_t j = 0; j < part.k; ++j)
        w.recv_decode(src, part.piece(detail::gathered(detail::raw_fp32<C>, ring_rank, g), j));
  }

 private:
  static std::size_t tee_out(const detail::Tee& tee, transport::Tag tag, std::span<const std::byte> out) {
    for (int i = 0; i < tee.count; ++i) tee.t->send(tee.first + i, tag, out);
    return out.size() * static_cast<std::size_t>(tee.count);
  }

  /// fp32: reduce-scatter and all-gather around the ring as one pipelined stream of messages,
  /// where outgoing message m needs only incoming message m-K.
  template <class C>
  static std::size_t classic(transport::Transport& t, const detail::Partition<C>& part, detail::Wire<C>& w, Job& job,
                             detail::Tee tee) {
    const int n = part.n, r = t.rank(), right = (r + 1) % n, left = (r + n - 1) % n, last_reduce = n - 2;
    const std::size_t k = part.k, total = 2 * static_cast<std::size_t>(n - 1) * k;
    std::size_t sent = 0;
    std::span<const std::byte> forward;  // all-gather: the message just received, sent on as is
    // Messages are the unit's own memory, sent without a copy, K of them in flight: at least K,
    // since the peer takes message m only at its iteration m + K (fewer would wait on each other
    // around the ring); fewer than NK, since the segment of message m is next written by incoming
    // message m + (N-1)K, received at iteration m + NK.
    detail::SendWindow window(t, w.ws.sends, k);
    for (std::size_t m = 0; m < total + k; ++m) {
      if (m >= k) {  // incoming message m-k: what this rank's message m is built from
        const int s = static_cast<int>((m - k) / k);
        const std::size_t j = (m - k) % k;
        if (s <= last_reduce) {
          w.recv_add(left, part.piece(r - s - 1, j));
        } else {
          forward = w.recv_decode(left, part.piece(r - (s - n + 1), j));
          sent += tee_out(tee, job.tag, forward);
        }
      }
      if (m >= total) continue;
      const int s = static_cast<int>(m / k);
      const std::size_t j = m % k;
      std::span<const std::byte> out;
      if (s <= last_reduce) {
        out = w.encode(part.piece(r - s, j), detail::stream(r, static_cast<int>(m)));
      } else if (s == last_reduce + 1) {  // this rank's fully reduced chunk r+1
        const std::span<float> own = part.piece(r + 1, j);
        detail::finish_mean(own, job.average, n, w.codec);
        out = w.encode_final(own, detail::stream(r, static_cast<int>(m)));
        sent += tee_out(tee, job.tag, out);
      } else {
        out = forward;
      }
      window.send(right, job.tag, out);
      sent += out.size();
    }
    window.drain();
    return sent;
  }

  /// fp32 on 2 ranks: every segment of the unit to the other rank at once, then each received
  /// one added to this rank's, once its own send has left (the peer must get this rank's values,
  /// not the sum); the receive is posted before that wait, so neither rank waits on the other's.
  template <class C>
  static std::size_t exchange(transport::Transport& t, detail::Wire<C>& w, Job& job, std::size_t segment_bytes) {
    const int other = 1 - t.rank();
    const std::size_t bytes = job.data.size() * sizeof(float);
    const std::size_t k = std::max<std::size_t>((bytes + segment_bytes - 1) / std::max<std::size_t>(segment_bytes, 1), 1);
    const auto segment = [&](std::size_t j) {
      const std::size_t from = detail::cut(job.data.size(), k, j, 1);
      return job.data.subspan(from, detail::cut(job.data.size(), k, j + 1, 1) - from);
    };
    detail::SendWindow window(t, w.ws.sends, k);
    for (std::size_t j = 0; j < k; ++j) window.send(other, job.tag, std::as_bytes(segment(j)));
    for (std::size_t j = 0; j < k; ++j) {
      const std::span<float> own = segment(j);
      const std::span<std::byte> in = w.recv_buffer(own.size());
      const std::size_t got = t.recv(other, job.tag, in);
      window.pop();  // segment j's send, the oldest
      w.decode_add(in.first(got), own);
      detail::finish_mean(own, job.average, 2, w.codec);
    }
    return bytes;
  }

  /// Any other codec: every chunk straight to its owner (partition.hpp), then the owners' encoded
  /// aggregates around the ring.
  template <class C>
  static std::size_t owners(transport::Transport& t, const detail::Partition<C>& part, detail::Wire<C>& w, Job& job,
                            detail::Tee tee) {
    const int n = part.n, r = t.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
    int m = 0;
    std::size_t sent = detail::push_to_owners(t, part, w, job, m);
    for (std::size_t j = 0; j < part.k; ++j) {
      const auto out = detail::reduce_owned(t, part, w, job, j, m);
      t.send(right, job.tag, out);
      sent += out.size() + tee_out(tee, job.tag, out);
    }
    for (int g = 1; g < n; ++g)
      for (std::size_t j = 0; j < part.k; ++j) {
        const auto in = w.recv_decode(left, part.piece(detail::gathered(false, r, g), j));
        if (g < n - 1) {
          t.send(right, job.tag, in);
          sent += in.size();
        }
        sent += tee_out(tee, job.tag, in);
      }
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(Ring);

}  // namespace gradsync::collective
