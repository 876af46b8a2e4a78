#pragma once
/// ReduceBroadcast: the MPI reduce-and-broadcast scheme of the low-precision study (section
/// 2.4.1, CNTK's default). The unit is split into N consecutive ranges, range i owned by rank i.
/// Every rank sends each range to its owner; the owner adds them up (decode-add, in rank order, so
/// the sum is reproducible), scales for the mean, encodes the result once and sends it to every
/// other rank, which decodes it. Two rounds of N-1 direct messages per rank: fewer steps than the
/// ring (2 instead of 2(N-1) latencies) for the same bytes, but all-to-all traffic.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::ReduceBroadcast> sync{transport, layout};
///   // or AnyCollective::parse("reduce-broadcast")
/// \endcode
#include "concept.hpp"
#include "wire.hpp"

namespace gradsync::collective {

struct ReduceBroadcast {
  std::string_view name() const { return "reduce-broadcast"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    auto range = [&](int i) {
      const std::size_t b = job.data.size() * static_cast<std::size_t>(i) / n;
      const std::size_t e = job.data.size() * static_cast<std::size_t>(i + 1) / n;
      return job.data.subspan(b, e - b);
    };
    detail::Wire<C> w{t, codec, ws, job.tag};
    codec::EncodeContext ctx = job.ctx;
    ctx.residual = {};
    std::size_t sent = 0;

    ctx.stream = detail::stream(r, 0);
    for (int k = 1; k < n; ++k) {  // starting at the right neighbour spreads the load over owners
      const int dst = (r + k) % n;
      const auto out = w.encode(range(dst), ctx);
      t.send(dst, job.tag, out);
      sent += out.size();
    }
    const std::span<float> own = range(r);
    for (int src = 0; src < n; ++src)
      if (src != r) w.recv_add(src, own);
    detail::finish_mean(own, job.average, n);

    ctx.stream = detail::stream(r, 1);
    const auto out = w.encode_final(own, ctx);
    for (int k = 1; k < n; ++k) t.send((r + k) % n, job.tag, out);
    sent += out.size() * static_cast<std::size_t>(n - 1);
    for (int src = 0; src < n; ++src)
      if (src != r) w.recv_decode(src, range(src));
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(ReduceBroadcast);

}  // namespace gradsync::collective
