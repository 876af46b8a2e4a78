#pragma once
/// ParameterServer (P3, section 4.2): every rank is also a server. Unit u is served by rank
/// u mod N (round-robin sharding). Workers push their encoded gradient to the unit's server; the
/// server decodes the pushes in rank order (so sums are reproducible), adds them to its own, and
/// broadcasts the encoded aggregate as soon as the last push arrived — no notify/pull round trip.
/// Under the Synchronizer (job.server set) the server role runs on its own thread with its own
/// priority lanes, which serves the most urgent unit whose pushes are all in
/// (collective/server.hpp); alone, the calling thread serves.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::ParameterServer> sync{transport, layout};
///   // or AnyCollective::parse("ps")
/// \endcode
#include "concept.hpp"
#include "server.hpp"

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
    if (r != server) {
      codec::EncodeContext ctx = job.ctx;
      ctx.residual = {};
      ctx.stream = detail::stream(r, 0);
      const std::size_t bytes = codec.encode(job.data, ws.send, ctx);
      t.send(server, job.tag, std::span(ws.send).first(bytes));
      const std::size_t got = t.recv(server, job.tag, ws.recv);
      codec.decode(std::span<const std::byte>(ws.recv).first(got), job.data);
      return bytes;
    }
    Unit<C> unit(t, codec, job, ws);
    if (job.server) {
      job.server->serve(unit);
    } else {
      unit.collect();
      unit.serve();
    }
    return unit.sent;
  }

 private:
  /// The serving rank's side of one unit.
  template <class C>
  struct Unit final : Served {
    Unit(transport::Transport& t, const C& codec, Job& job, Workspace& ws)
        : Served(t, job.tag, job.priority), t(t), codec(codec), job(job), ws(ws) {}
    std::span<std::byte> buffer() override { return ws.recv; }
    void add(std::size_t bytes) override { codec.decode_add(std::span<const std::byte>(ws.recv).first(bytes), job.data); }
    void serve() override {
      const int n = t.size(), r = t.rank();
      detail::finish_mean(job.data, job.average, n);
      codec::EncodeContext ctx = job.ctx;
      ctx.stream = detail::stream(r, 1);
      const std::size_t bytes = detail::encode_final(codec, job.data, ctx, ws);
      for (int dst = 0; dst < n; ++dst)
        if (dst != r) t.send(dst, job.tag, std::span(ws.send).first(bytes));
      sent = bytes * static_cast<std::size_t>(n - 1);
    }
    transport::Transport& t;
    const C& codec;
    Job& job;
    Workspace& ws;
    std::size_t sent = 0;
  };
};
GRADSYNC_CHECK_COLLECTIVE(ParameterServer);

}  // namespace gradsync::collective
