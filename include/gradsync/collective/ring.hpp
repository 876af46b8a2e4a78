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
/// With fp32 (codec::Identity) the chunks travel as raw floats and the all-gather receives
/// straight into the unit: no copies besides the transfer itself.
#include <utility>

#include "concept.hpp"
#include "wire.hpp"

namespace gradsync::collective {

struct Ring {
  std::string_view name() const { return "ring"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const std::span<float> data = job.data;
    auto chunk = [&](int i) {
      i = ((i % n) + n) % n;
      const std::size_t b = data.size() * static_cast<std::size_t>(i) / n;
      const std::size_t e = data.size() * static_cast<std::size_t>(i + 1) / n;
      return data.subspan(b, e - b);
    };
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    detail::Wire<C> w{t, codec, ws, job.tag};
    std::size_t sent = 0;
    codec::EncodeContext ctx = job.ctx;
    ctx.residual = {};

    for (int s = 0; s < n - 1; ++s) {
      ctx.stream = detail::stream(r, s);
      const auto out = w.encode(chunk(r - s), ctx);
      const std::size_t got = t.sendrecv(right, out, left, ws.recv, job.tag);
      w.decode_add(std::span<const std::byte>(ws.recv).first(got), chunk(r - s - 1));
      sent += out.size();
    }

    const std::span<float> own = chunk(r + 1);
    detail::finish_mean(own, job.average, n);
    ctx.stream = detail::stream(r, n - 1);
    std::span<const std::byte> out = w.encode_final(own, ctx);

    for (int s = 0; s < n - 1; ++s) {
      const std::span<float> next = chunk(r - s);
      const std::span<std::byte> in = w.landing(next);
      const std::size_t got = t.sendrecv(right, out, left, in, job.tag);
      w.decode(in.first(got), next);
      sent += out.size();
      if constexpr (detail::raw_fp32<C>) {
        out = std::as_bytes(next);  // forward the chunk we just received, in place
      } else {
        std::swap(ws.send, ws.recv);  // forward what we just received, untouched
        out = std::span<const std::byte>(ws.send).first(got);
      }
    }
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(Ring);

}  // namespace gradsync::collective
