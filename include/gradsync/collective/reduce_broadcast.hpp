#pragma once
/// ReduceBroadcast: the MPI reduce-and-broadcast scheme of the low-precision study (section
/// 2.4.1, CNTK's default). The unit is split into N consecutive ranges, range i owned by rank i.
/// Every rank sends each range to its owner; the owner adds them up (decode-add, in rank order, so
/// the sum is reproducible), scales for the mean, encodes the result once and sends it to every
/// other rank, which decodes it. Two rounds of N-1 direct messages per rank (per segment of about
/// `segment_bytes`): fewer steps than the ring (2 instead of 2(N-1) latencies) for the same
/// bytes, but all-to-all traffic. A lossy codec touches each element twice: on its rank and in
/// its owner's aggregate, both with error feedback when the codec keeps a residual.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::ReduceBroadcast> sync{transport, layout};
///   // or AnyCollective::parse("reduce-broadcast")
/// \endcode
#include "concept.hpp"
#include "partition.hpp"
#include "wire.hpp"

namespace gradsync::collective {

struct ReduceBroadcast {
  /// Wire bytes per message, about (as Ring::segment_bytes): the owners' work on one segment
  /// overlaps the transfer of the next.
  std::size_t segment_bytes = std::size_t{1} << 20;
  /// Units only through the codec (device codecs too).
  static constexpr Traits traits() { return {.through_codec = true}; }

  std::string_view name() const { return "reduce-broadcast"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const detail::Partition<C> part(job.data, n, codec, segment_bytes);
    detail::Wire<C> w{t, codec, ws, job};
    int m = 0;
    std::size_t sent = detail::push_to_owners(t, part, w, job, m);
    for (std::size_t j = 0; j < part.k; ++j) {
      const auto out = detail::reduce_owned(t, part, w, job, j, m);
      for (int d = 1; d < n; ++d) t.send((r + d) % n, job.tag, out);
      sent += out.size() * static_cast<std::size_t>(n - 1);
    }
    for (int d = 1; d < n; ++d)
      for (std::size_t j = 0; j < part.k; ++j) w.recv_decode((r + n - d) % n, part.piece(r + n - d, j));
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(ReduceBroadcast);

}  // namespace gradsync::collective
