#pragma once
/// ParameterServer (P3, section 4.2): every rank is also a server. Unit u is served by rank
/// u mod N (round-robin sharding). Workers push their encoded gradient to the unit's server; the
/// server decodes the pushes in rank order (so sums are reproducible), adds them to its own, and
/// broadcasts the encoded aggregate as soon as the last push arrived — no notify/pull round trip.
/// Units reach the server in the Synchronizer's priority order, so it serves them in that order.
#include "concept.hpp"

namespace gradsync::collective {

struct ParameterServer {
  std::string_view name() const { return "ps"; }

  /// The rank that serves unit `unit` among `ranks`.
  static int server_of(std::uint64_t unit, int ranks) { return static_cast<int>(unit % static_cast<std::uint64_t>(ranks)); }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const int server = server_of(job.ctx.unit, n);
    codec::EncodeContext ctx = job.ctx;
    ctx.residual = {};
    ctx.stream = detail::stream(r, 0);

    if (r != server) {
      const std::size_t bytes = codec.encode(job.data, ws.send, ctx);
      t.send(server, job.tag, std::span(ws.send).first(bytes));
      const std::size_t got = t.recv(server, job.tag, ws.recv);
      codec.decode(std::span<const std::byte>(ws.recv).first(got), job.data);
      return bytes;
    }
    for (int src = 0; src < n; ++src) {
      if (src == r) continue;
      const std::size_t got = t.recv(src, job.tag, ws.recv);
      codec.decode_add(std::span<const std::byte>(ws.recv).first(got), job.data);
    }
    detail::finish_mean(job.data, job.average, n);
    ctx.stream = detail::stream(r, 1);
    const std::size_t bytes = detail::encode_final(codec, job.data, ctx, ws);
    for (int dst = 0; dst < n; ++dst)
      if (dst != r) t.send(dst, job.tag, std::span(ws.send).first(bytes));
    return bytes * static_cast<std::size_t>(n - 1);
  }
};
GRADSYNC_CHECK_COLLECTIVE(ParameterServer);

}  // namespace gradsync::collective
