#pragma once
/// Ring: reduce-scatter then all-gather, 2(N-1) steps, each rank sending 2(N-1)/N of the unit —
/// bandwidth-optimal for large units.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::Ring> sync{transport, layout};
/// \endcode
///
/// Reduce-scatter: at step s rank r sends chunk r-s to its right neighbour and adds chunk r-s-1
/// from its left one (decode-add, then re-encode next step: right for codecs whose wire form is
/// not summable). Rank r then owns chunk r+1 fully reduced, scales it for the mean and encodes it
/// once; all-gather forwards those payloads verbatim, so every rank decodes identical bytes.
///
/// Pipelined: every chunk travels as K segments of about `segment_bytes` on the wire, and segment j of
/// step s leaves as soon as segment j of step s-1 has arrived — each rank's outgoing messages
/// form one stream where message m needs only incoming message m-K. A rank keeps up to K
/// segments queued on its link while it decodes and encodes, so codec work overlaps the
/// transfer instead of adding to it (alpha-beta: 2(N-1)(alpha + chunk/beta) plus the compute
/// of one segment, not plus the compute of the whole unit). Messages are at most one segment,
/// so transports buffer at most one chunk per unit.
/// With fp32 (codec::Identity) the chunks travel as raw floats, sent straight from the unit
/// (Transport::send_async: no copy) and received by the all-gather straight into it.
#include <algorithm>
#include <exception>

#include "concept.hpp"
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

 private:
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
}  // namespace detail

struct Ring {
  /// Wire bytes per segment, about: big enough that each message's fixed cost (alpha, a thread
  /// wake-up) stays small next to its transfer, small enough that several segments per chunk keep
  /// the link busy. Counted on the wire, so a codec that compresses 4x sends 4x the elements.
  std::size_t segment_bytes = std::size_t{1} << 20;

  std::string_view name() const { return "ring"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const std::span<float> data = job.data;
    const std::size_t steps = 2 * static_cast<std::size_t>(n - 1);
    // Segments per chunk, the same on every rank; message indices also key the RNG streams, which
    // must stay below Hierarchical's phase bit.
    const std::size_t widest = (data.size() + n - 1) / n;
    const std::size_t wire = std::max<std::size_t>(codec.encoded_bytes(widest), 1);
    const std::size_t k = std::clamp<std::size_t>((wire + segment_bytes - 1) / std::max<std::size_t>(segment_bytes, 1), 1,
                                                  std::max<std::size_t>(0x7fff / steps, 1));
    auto piece = [&](int i, std::size_t j) {
      i = ((i % n) + n) % n;
      const std::size_t b = data.size() * static_cast<std::size_t>(i) / n;
      const std::size_t len = data.size() * static_cast<std::size_t>(i + 1) / n - b;
      return data.subspan(b + len * j / k, len * (j + 1) / k - len * j / k);
    };
    const int right = (r + 1) % n, left = (r + n - 1) % n, last_reduce = n - 2;
    detail::Wire<C> w{t, codec, ws, job.tag};
    codec::EncodeContext ctx = job.ctx;
    ctx.residual = {};
    std::size_t sent = 0;
    std::span<const std::byte> forward;  // all-gather: the message just received, sent on as is
    // fp32 messages are the unit's own memory, sent without a copy, K of them in flight: at
    // least K, since the peer takes message m only at its iteration m + K (fewer would wait on
    // each other around the ring); fewer than nK, since the segment of message m is next written
    // by incoming message m + (n-1)K, received at iteration m + nK.
    detail::SendWindow window(t, ws.sends, k);

    const std::size_t total = steps * k;
    for (std::size_t m = 0; m < total + k; ++m) {
      if (m >= k) {  // incoming message m-k: what this rank's message m is built from
        const int s = static_cast<int>((m - k) / k);
        const std::size_t j = (m - k) % k;
        if (s <= last_reduce) {
          w.recv_add(left, piece(r - s - 1, j));
        } else {
          const std::span<float> out = piece(r - (s - n + 1), j);
          forward = w.recv_decode(left, out);
        }
      }
      if (m >= total) continue;
      const int s = static_cast<int>(m / k);
      const std::size_t j = m % k;
      std::span<const std::byte> out;
      ctx.stream = detail::stream(r, static_cast<int>(m));
      if (s <= last_reduce) {
        out = w.encode(piece(r - s, j), ctx);
      } else if (s == last_reduce + 1) {  // this rank's fully reduced chunk r+1
        const std::span<float> own = piece(r + 1, j);
        detail::finish_mean(own, job.average, n);
        out = w.encode_final(own, ctx);
      } else {
        out = forward;
      }
      if constexpr (detail::raw_fp32<C>) window.send(right, job.tag, out);
      else t.send(right, job.tag, out);  // encoded into ws.send, reused by the next message
      sent += out.size();
    }
    window.drain();
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(Ring);

}  // namespace gradsync::collective
