#pragma once
/// detail::Partition and the owner pattern shared by Ring (lossy codecs) and ReduceBroadcast.
///
/// A unit is cut into N chunks, chunk i owned by rank i, each chunk into K segments of about
/// `segment_bytes` on the wire; cuts fall on multiples of the codec's bucket (codec::Traits::grain), so
/// every piece is bucketed as the whole unit would be. Owner pattern (the low-precision study's
/// reduce-and-broadcast, sec. 2.4.1): every rank encodes chunk i of its own data and pushes it to
/// rank i (push_to_owners); the owner decodes and adds the pushes to its own chunk in a fixed
/// rank order and encodes the aggregate once (reduce_owned). A lossy codec touches each element
/// twice, whatever N.
///
/// \code
///   detail::Partition part(job.data, n, codec, segment_bytes);
///   detail::Wire<C> w{t, codec, ws, job};
///   int m = 0;                                              // message index (RNG streams)
///   sent += detail::push_to_owners(t, part, w, job, m);
///   for (j...) { auto out = detail::reduce_owned(t, part, w, job, j, m); ... send out ... }
/// \endcode
#include <algorithm>

#include "wire.hpp"

namespace gradsync::collective::detail {

/// Where piece i of `parts` near-equal pieces of n elements starts: at a multiple of `grain`;
/// the last piece takes the rest (pieces may be empty when n is small).
inline std::size_t cut(std::size_t n, std::size_t parts, std::size_t i, std::size_t grain) {
  const std::size_t grains = (n + grain - 1) / grain;
  return std::min(n, grains * i / parts * grain);
}

/// N chunks of K segments, the same on every rank.
template <class C>
struct Partition {
  Partition(std::span<float> data, int ranks, const C& codec, std::size_t segment_bytes)
      : data(data), n(ranks), grain(codec.traits().grain) {
    const std::size_t steps = 2 * static_cast<std::size_t>(std::max(n - 1, 1));
    const std::size_t widest = (data.size() + n - 1) / n;
    const std::size_t wire = std::max<std::size_t>(codec.encoded_bytes(widest), 1);
    // Message indices also key the RNG streams, which must stay below Hierarchical's phase bit.
    k = std::clamp<std::size_t>((wire + segment_bytes - 1) / std::max<std::size_t>(segment_bytes, 1), 1,
                                std::max<std::size_t>(0x7fff / steps, 1));
  }
  /// Segment j of chunk i (i taken modulo N).
  std::span<float> piece(int i, std::size_t j) const {
    i = ((i % n) + n) % n;
    const std::size_t b = cut(data.size(), n, i, grain), len = cut(data.size(), n, i + 1, grain) - b;
    const std::size_t from = cut(len, k, j, grain);
    return data.subspan(b + from, cut(len, k, j + 1, grain) - from);
  }

  std::span<float> data;
  int n;
  std::size_t grain, k = 1;
};

/// Sends every segment of every chunk of this rank's data but its own to the chunk's owner,
/// starting at the right neighbour so the owners' load is spread; returns the bytes sent. `m`
/// counts messages (each encode's RNG stream).
template <class C>
std::size_t push_to_owners(transport::Transport& t, const Partition<C>& part, Wire<C>& w, const Job& job, int& m) {
  const int n = part.n, r = t.rank();
  std::size_t sent = 0;
  for (std::size_t j = 0; j < part.k; ++j)
    for (int d = 1; d < n; ++d) {
      const auto out = w.encode(part.piece(r + d, j), stream(r, m++));
      t.send((r + d) % n, job.tag, out);
      sent += out.size();
    }
  return sent;
}

/// Adds the N-1 pushes of segment j of this rank's chunk to it (in a fixed order: reproducible
/// sums), scales it for the mean and returns its encoded aggregate; the segment becomes what
/// every rank will decode.
template <class C>
std::span<const std::byte> reduce_owned(transport::Transport& t, const Partition<C>& part, Wire<C>& w, const Job& job,
                                        std::size_t j, int& m) {
  const int n = part.n, r = t.rank();
  const std::span<float> own = part.piece(r, j);
  for (int d = 1; d < n; ++d) w.recv_add((r + n - d) % n, own);
  finish_mean(own, job.average, n, w.codec);
  return w.encode_final(own, stream(r, m++));
}

}  // namespace gradsync::collective::detail
