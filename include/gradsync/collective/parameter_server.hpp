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
/// (collective/server.hpp); before start, the calling thread serves.
/// With a priority that classifies blocks (DGT, priority::Contribution) the unimportant blocks are
/// pushed best-effort and dropped when late (collective/differential.hpp).
///
/// \code
///   gradsync::Synchronizer<..., gradsync::collective::ParameterServer> sync{transport, layout};
///   // or AnyCollective::parse("ps")
/// \endcode
#include <functional>
#include <memory>

#include "concept.hpp"
#include "differential.hpp"
#include "server.hpp"
#include "wire.hpp"

namespace gradsync::collective {

struct ParameterServer {
  static constexpr bool differential = true;  ///< can push unimportant blocks best-effort (DGT)
  /// Units only through the codec (device codecs too); DGT's best-effort path reads fp32 on the host.
  static constexpr bool through_codec = true;
  /// Makes the best-effort channel for DGT (collective over the transport): UDP by default.
  std::function<std::unique_ptr<transport::BestEffort>(transport::Transport&)> best_effort_channel =
      [](transport::Transport& t) { return std::make_unique<transport::Udp>(t); };

  std::string_view name() const { return "ps"; }

  /// Starts this rank's server thread (collective::Setup), and the best-effort channel when
  /// the units will carry a classification; copies made afterwards share them.
  void start(const Setup& setup) {
    server_ = std::make_shared<Server>(setup.transport, setup.lane_capacity, setup.units);
    if (setup.best_effort)
      best_effort_ = std::make_shared<detail::BestEffortState>(best_effort_channel(setup.transport), setup.session,
                                                               setup.transport.rank(), setup.units);
  }
  /// Fails the units the server still holds and joins its thread.
  void stop() {
    if (server_) server_->stop();
  }
  /// The worker a unit held by this rank's server waits for, and since when (peer -1: none).
  transport::Wait stall() const { return server_ ? server_->stall() : transport::Wait{}; }

  /// The rank that serves unit `unit` among `ranks`.
  static int server_of(std::uint64_t unit, int ranks) { return static_cast<int>(unit % static_cast<std::uint64_t>(ranks)); }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    const int server = server_of(job.ctx.unit, n);
    if (!job.important.empty()) {
      if constexpr (detail::raw_fp32<C>) return run_differential(t, job, ws, server);
      else throw UsageError("gradsync: differential transmission (priority 'dgt') sends fp32 blocks; use codec 'fp32'");
    }
    detail::Wire<C> w{t, codec, ws, job};
    if (r != server) {
      const auto out = w.encode(job.data, detail::stream(r, 0));
      t.send(server, job.tag, out);
      w.recv_decode(server, job.data);
      return out.size();
    }
    Unit<C> unit(t, w);
    if (server_) {
      server_->serve(unit);
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

  /// DGT: this rank's part of unit `job` whose server is `server`.
  std::size_t run_differential(transport::Transport& t, Job& job, Workspace& ws, int server) const {
    if (!best_effort_ || job.ctx.residual.size() != job.data.size())
      throw UsageError("gradsync: differential transmission needs a Synchronizer (it starts the best-effort channel "
                       "and keeps the residual of dropped blocks)");
    if (t.rank() != server) return push_differential(t, job, ws, server);
    DifferentialUnit unit(t, job, best_effort_->router);
    server_->serve(unit);
    if (job.blocks) job.blocks->rejected += unit.rejected;
    count_blocks(job, unit.dropped_block);
    return unit.sent;
  }

  /// Adds the unit's unimportant blocks, and those this rank's share of the aggregate left out
  /// (now in its residual), to its counts.
  static void count_blocks(Job& job, std::span<const std::uint8_t> dropped_block) {
    if (!job.blocks) return;
    job.blocks->best_effort += static_cast<std::uint64_t>(std::ranges::count(job.important, 0));
    job.blocks->dropped += static_cast<std::uint64_t>(std::ranges::count(dropped_block, 1));
  }

  /// A worker: v = gradient + residual; unimportant pieces of v as datagrams, then the important
  /// blocks and the block magnitudes over the transport; the residual keeps the pieces the server
  /// did not take.
  std::size_t push_differential(transport::Transport& t, Job& job, Workspace& ws, int server) const {
    const std::span<float> v = job.data, e = job.ctx.residual;
    const detail::Pieces pieces(v.size(), job.block);
    auto important = [&](std::size_t k) { return job.important[pieces.block_of(k)] != 0; };
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += e[i];
    std::size_t sent = 0, packed = 0;
    ws.send.resize(std::max(ws.send.size(), 4 * (v.size() + job.magnitudes.size())));
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first == last) continue;
      if (important(k)) {  // packed in order into the reliable push
        std::memcpy(ws.send.data() + 4 * packed, v.data() + first, 4 * (last - first));
        packed += last - first;
        std::fill(e.begin() + first, e.begin() + last, 0.0f);
        continue;
      }
      std::copy(v.begin() + first, v.begin() + last, e.begin() + first);  // kept unless the server takes it
      std::byte datagram[sizeof(detail::PieceHeader) + 4 * 256];
      detail::PieceHeader h{.session = best_effort_->router.session(), .iteration = static_cast<std::int64_t>(job.ctx.iteration),
                            .unit = job.tag, .piece = static_cast<std::uint32_t>(k),
                            .src = static_cast<std::uint32_t>(t.rank()), .count = static_cast<std::uint32_t>(last - first)};
      const std::size_t bytes = sizeof h + 4 * (last - first);
      std::memcpy(datagram + sizeof h, v.data() + first, 4 * (last - first));
      std::memcpy(datagram, &h, sizeof h);
      h.crc = detail::crc_of(std::span<const std::byte>(datagram, bytes));
      std::memcpy(datagram, &h, sizeof h);
      best_effort_->channel->send(server, std::span<const std::byte>(datagram, bytes));
      sent += bytes;
    }
    std::memcpy(ws.send.data() + 4 * packed, job.magnitudes.data(), 4 * job.magnitudes.size());
    packed += job.magnitudes.size();
    t.send(server, job.tag, std::span<const std::byte>(ws.send).first(4 * packed));
    sent += 4 * packed;
    // Which pieces the aggregate took from each rank, the magnitudes, then the pieces it carries.
    const detail::Broadcast b(pieces, job.important, t.size());
    ws.recv.resize(std::max(ws.recv.size(), b.head + 4 * v.size()));
    const std::size_t got = t.recv(server, job.tag, ws.recv);
    const std::byte* maps = ws.recv.data();
    if (got < b.maps || got != b.bytes(maps + b.row * static_cast<std::size_t>(server)))
      throw WireError("gradsync: " + t.describe() + ": differential aggregate of " + std::to_string(got) +
                      " bytes from rank " + std::to_string(server) + " (ranks disagree on layout, slicing or policies)");
    std::memcpy(job.magnitudes.data(), ws.recv.data() + b.maps, b.head - b.maps);
    std::size_t at = b.head;
    b.each(maps + b.row * static_cast<std::size_t>(server), [&](std::size_t first, std::size_t last, bool carried) {
      if (!carried) return std::fill(v.begin() + first, v.begin() + last, 0.0f);
      std::memcpy(v.data() + first, ws.recv.data() + at, 4 * (last - first));
      at += 4 * (last - first);
    });
    const std::byte* taken = maps + b.row * static_cast<std::size_t>(t.rank());
    std::vector<std::uint8_t> dropped_block(job.important.size(), 0);
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first == last || important(k)) continue;
      if (detail::Broadcast::bit(taken, k)) std::fill(e.begin() + first, e.begin() + last, 0.0f);
      else dropped_block[pieces.block_of(k)] = 1;
    }
    count_blocks(job, dropped_block);
    return sent;
  }

  /// The server's side of a DGT unit: every worker's important push (with its block magnitudes),
  /// and the pieces that arrive before the last of them.
  struct DifferentialUnit final : Served {
    DifferentialUnit(transport::Transport& t, Job& job, detail::DatagramRouter& router)
        : Served(t, job.tag, job.priority), job(job), router(router), pieces(job.data.size(), job.block),
          taken(static_cast<std::size_t>(t.size()), std::vector<std::uint8_t>(pieces.count, 0)),
          stage(static_cast<std::size_t>(t.size()), std::vector<float>(job.data.size(), 0.0f)),
          reported(static_cast<std::size_t>(t.size())),
          pushed(static_cast<std::size_t>(t.size()), 0),
          inbox{static_cast<std::int64_t>(job.ctx.iteration), job.tag, &pieces, job.important, &taken, &stage} {
      pushed[static_cast<std::size_t>(t.rank())] = 1;
      for (std::size_t k = 0; k < pieces.count; ++k)
        if (job.important[pieces.block_of(k)]) important_elements += pieces.range(k).second - pieces.range(k).first;
    }
    bool poll() override {
      if (!opened) {  // on the server's thread: the router is its alone
        router.open(inbox);
        opened = true;
      }
      router.pump();
      const std::size_t blocks = job.magnitudes.size(), expected = 4 * (important_elements + blocks);
      in.resize(important_elements + blocks);
      for (int w = 0; w < t_.size(); ++w) {
        if (pushed[static_cast<std::size_t>(w)]) continue;
        const auto got = t_.try_recv(w, tag_, std::as_writable_bytes(std::span(in)));
        if (!got) continue;
        if (*got != expected)
          throw WireError("gradsync: differential push of " + std::to_string(*got) + " bytes from rank " +
                          std::to_string(w) + ", expected " + std::to_string(expected) +
                          " (ranks disagree on the classification: same priority knobs on every rank?)");
        reported[static_cast<std::size_t>(w)].assign(in.end() - static_cast<std::ptrdiff_t>(blocks), in.end());
        std::size_t at = 0;
        for (std::size_t k = 0; k < pieces.count; ++k) {
          const auto [first, last] = pieces.range(k);
          if (first == last || !job.important[pieces.block_of(k)]) continue;
          std::copy(in.begin() + at, in.begin() + at + (last - first), stage[static_cast<std::size_t>(w)].begin() + first);
          at += last - first;
        }
        pushed[static_cast<std::size_t>(w)] = 1;
        progressed();
      }
      if (std::ranges::find(pushed, 0) != pushed.end()) return false;
      router.pump();        // what arrived with the last push, which came after it
      router.close(inbox);  // the deadline: the last important push is in
      rejected = router.take_rejected();
      return true;
    }
    int missing() const override { return static_cast<int>(std::ranges::find(pushed, 0) - pushed.begin()); }
    void serve() override {
      const int n = t_.size(), r = t_.rank();
      const std::span<float> v = job.data, e = job.ctx.residual;
      // This rank's own: important pieces all, unimportant ones where some worker's arrived too;
      // the rest waits in the residual, as a worker's late datagram does.
      auto& own = taken[static_cast<std::size_t>(r)];
      dropped_block.assign(job.important.size(), 0);
      for (std::size_t k = 0; k < pieces.count; ++k) {
        const auto [first, last] = pieces.range(k);
        if (first == last) continue;
        bool kept = job.important[pieces.block_of(k)] != 0;
        if (!kept) {
          for (int w = 0; w < n; ++w) kept = kept || (w != r && taken[static_cast<std::size_t>(w)][k]);
          own[k] = kept;
          dropped_block[pieces.block_of(k)] |= !kept;
        }
        for (std::size_t i = first; i < last; ++i) {
          if (kept) v[i] += e[i], e[i] = 0.0f;
          else e[i] += v[i], v[i] = 0.0f;
        }
      }
      for (int w = 0; w < n; ++w)  // rank order: reproducible sums
        if (w != r)
          for (std::size_t i = 0; i < v.size(); ++i) v[i] += stage[static_cast<std::size_t>(w)][i];
      detail::finish_mean(v, job.average, n);
      reported[static_cast<std::size_t>(r)].assign(job.magnitudes.begin(), job.magnitudes.end());
      for (std::size_t j = 0; j < job.magnitudes.size(); ++j) {
        float sum = 0;
        for (const auto& m : reported) sum += m[j];
        job.magnitudes[j] = sum / static_cast<float>(n);
      }
      const detail::Broadcast b(pieces, job.important, n);
      std::vector<std::byte> out(b.head);
      std::memcpy(out.data() + b.maps, job.magnitudes.data(), b.head - b.maps);
      for (int w = 0; w < n; ++w)
        for (std::size_t k = 0; k < pieces.count; ++k)
          if (taken[static_cast<std::size_t>(w)][k]) out[b.row * static_cast<std::size_t>(w) + k / 8] |= std::byte(1u << (k % 8));
      out.resize(b.bytes(out.data() + b.row * static_cast<std::size_t>(r)));
      std::size_t at = b.head;
      b.each(out.data() + b.row * static_cast<std::size_t>(r), [&](std::size_t first, std::size_t last, bool carried) {
        if (!carried) return;
        std::memcpy(out.data() + at, v.data() + first, 4 * (last - first));
        at += 4 * (last - first);
      });
      for (int w = 0; w < n; ++w)
        if (w != r) t_.send(w, tag_, out);
      sent = out.size() * static_cast<std::size_t>(n - 1);
    }

    Job& job;
    detail::DatagramRouter& router;
    detail::Pieces pieces;
    std::vector<std::vector<std::uint8_t>> taken;
    std::vector<std::vector<float>> stage;
    std::vector<std::vector<float>> reported;  // [rank][block]: the magnitudes each rank pushed
    std::vector<std::uint8_t> pushed;
    std::vector<std::uint8_t> dropped_block;  // per block: some piece of this rank's own left out
    detail::Inbox inbox;
    std::vector<float> in;
    std::size_t important_elements = 0, sent = 0;
    std::uint64_t rejected = 0;
    bool opened = false;
  };

  std::shared_ptr<Server> server_;
  std::shared_ptr<detail::BestEffortState> best_effort_;
};
GRADSYNC_CHECK_COLLECTIVE(ParameterServer);

}  // namespace gradsync::collective
