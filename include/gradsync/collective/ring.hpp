#pragma once
/// Ring: reduce-scatter then all-gather, 2(N-1) steps, each rank sending 2(N-1)/N of the unit —
/// bandwidth-optimal for large units.
///
/// Reduce-scatter: at step s rank r sends chunk r-s to its right neighbour and adds chunk r-s-1
/// from its left one (decode-add, then re-encode next step: right for codecs whose wire form is
/// not summable). Rank r then owns chunk r+1 fully reduced, scales it for the mean and encodes it
/// once; all-gather forwards those payloads verbatim, so every rank decodes identical bytes.
#include <utility>

#include "concept.hpp"

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
    std::size_t sent = 0;
    codec::EncodeContext ctx = job.ctx;
    ctx.residual = {};

    for (int s = 0; s < n - 1; ++s) {
      ctx.stream = detail::stream(r, s);
      const std::size_t bytes = codec.encode(chunk(r - s), ws.send, ctx);
      const std::size_t got = t.sendrecv(right, std::span(ws.send).first(bytes), left, ws.recv, job.tag);
      codec.decode_add(std::span<const std::byte>(ws.recv).first(got), chunk(r - s - 1));
      sent += bytes;
    }

    const std::span<float> own = chunk(r + 1);
    detail::finish_mean(own, job.average, n);
    ctx.stream = detail::stream(r, n - 1);
    std::size_t bytes = detail::encode_final(codec, own, ctx, ws);

    for (int s = 0; s < n - 1; ++s) {
      const std::size_t got = t.sendrecv(right, std::span(ws.send).first(bytes), left, ws.recv, job.tag);
      codec.decode(std::span<const std::byte>(ws.recv).first(got), chunk(r - s));
      sent += bytes;
      std::swap(ws.send, ws.recv);  // forward what we just received, untouched
      bytes = got;
    }
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(Ring);

}  // namespace gradsync::collective
