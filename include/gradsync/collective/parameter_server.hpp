#pragma once
/// ParameterServer (P3, section 4.2): every rank is also a server. Unit u is served by rank
/// u mod N (round-robin sharding). Workers push their encoded gradient to the unit's server; the
/// server decodes the pushes in rank order (so sums are reproducible), adds them to its own, and
/// broadcasts the encoded aggregate as soon as the last push arrived — no notify/pull round trip.
/// A lossy codec touches each element twice: in its worker's push and in the server's aggregate,
/// both with error feedback when the codec keeps a residual (the server's own gradient is added
/// exactly).
/// Under a Synchronizer (which calls start) the server role runs on a thread of its own with its
/// own priority lanes, which serves the most urgent unit whose pushes are all in
/// (collective/server.hpp), owned by the State start() returns; without one, the calling thread
/// serves.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::ParameterServer> sync{transport, layout};
///   // or AnyCollective::parse("ps")
/// \endcode
#include <memory>

#include "concept.hpp"
#include "server.hpp"
#include "wire.hpp"

namespace gradsync::collective {

/// A rank's server thread as a collective's Runtime (ParameterServer::start).
class Serving : public Runtime {
 public:
  explicit Serving(const Setup& setup) : server(setup.transport, setup.lane_capacity, setup.elements.size()) {}
  /// Fails the units the server still holds and joins its thread.
  void stop() override { server.stop(); }
  /// The worker a unit held by this rank's server waits for, and since when (peer -1: none).
  transport::Wait stall() const override { return server.stall(); }
  Server server;
};

struct ParameterServer {
  /// Units only through the codec (device codecs too).
  static constexpr Traits traits() { return {.through_codec = true}; }

  std::string_view name() const { return "ps"; }

  /// This rank's server thread (collective::Setup), started on the first unit it serves.
  using State = Serving;
  std::unique_ptr<State> start(const Setup& setup) const { return std::make_unique<State>(setup); }

  /// The rank that serves unit `unit` among `ranks`.
  static int server_of(std::uint64_t unit, int ranks) { return static_cast<int>(unit % static_cast<std::uint64_t>(ranks)); }

  /// A unit this rank serves goes to its server thread, which serves the units in priority order.
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws, State& serving) const {
    return serve_or_push(t, codec, job, ws, &serving);
  }
  /// Without a server thread: the calling thread serves each unit as it comes.
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    return serve_or_push(t, codec, job, ws, nullptr);
  }

 private:
  template <codec::Codec C>
  std::size_t serve_or_push(transport::Transport& t, const C& codec, Job& job, Workspace& ws, State* serving) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const int server = server_of(job.ctx.unit, n);
    detail::Wire<C> w{t, codec, ws, job};
    if (r != server) {
      const auto out = w.encode(job.data, detail::stream(r, 0));
      t.send(server, job.tag, out);
      w.recv_decode(server, job.data);
      return out.size();
    }
    Unit<C> unit(t, w);
    if (serving) {
      serving->server.serve(unit);
    } else {
      unit.collect();
      unit.serve();
    }
    return unit.sent;
  }

  /// The serving rank's side of one unit.
  template <class C>
  struct Unit final : Served {
    Unit(transport::Transport& t, detail::Wire<C>& w)
        : Served(t, w.job.tag, w.job.priority), t(t), w(w), in(w.recv_buffer(w.job.data.size())) {}
    std::span<std::byte> buffer() override { return in; }
    void add(std::size_t bytes) override { w.decode_add(in.first(bytes), w.job.data); }
    void serve() override {
      const int n = t.size(), r = t.rank();
      detail::finish_mean(w.job.data, w.job.average, n, w.codec);
      const auto out = w.encode_final(w.job.data, detail::stream(r, 1));
      for (int dst = 0; dst < n; ++dst)
        if (dst != r) t.send(dst, w.job.tag, out);
      sent = out.size() * static_cast<std::size_t>(n - 1);
    }
    transport::Transport& t;
    detail::Wire<C>& w;
    std::span<std::byte> in;  // where pushes land
    std::size_t sent = 0;
  };
};
GRADSYNC_CHECK_COLLECTIVE(ParameterServer);

}  // namespace gradsync::collective
