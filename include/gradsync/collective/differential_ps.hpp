#pragma once
/// DifferentialPs (DGT, Zhou et al.): differential gradient transmission over the parameter
/// server. Each unit is cut into blocks of `block` elements (n = 1024 in the paper); a block's
/// contribution is the sliding average C(t) = alpha * C(t-1) + (1 - alpha) * mean|g| (alpha = 0.3,
/// C(0) = 0), and the top p% of a unit's blocks by contribution are important, p = p0 * loss_t /
/// loss_0 (p0 = 1: everything is important at the start, fewer blocks as the loss falls; beyond the
/// paper, p0 > 1 keeps every block important until the loss falls below loss_0 / p0, and p0 times
/// as many after: it trades batch completion time for accuracy per iteration).
///
/// Important blocks go to the unit's server (rank u mod N, as ParameterServer) over the reliable
/// transport; the unimportant ones go best-effort as datagrams of at most 256 elements
/// (transport::BestEffort, UDP marked low-priority), sent first so the network can favour the
/// reliable traffic. The server takes every important block and the unimportant pieces that have
/// arrived by the time the last important push is in — later ones are dropped. Its own unimportant
/// piece joins the aggregate only where some worker's did, so a piece of the aggregate holds every
/// rank's share or none: the broadcast (a bitmap per rank of the pieces taken, then only the pieces
/// that carry anything) shrinks with the push instead of sending the server's share alone in full.
/// Every rank keeps what was dropped in the unit's residual and sends it again with its next
/// gradient (the paper simply discards it): nothing is lost for good, and the mean over ranks stays
/// unbiased over time. The wire: collective/differential.hpp.
///
/// Every rank must classify alike, so everything it uses is shared. mean|g| is the mean over ranks
/// of each rank's own mean |v| per block, which the pushes carry and the server's broadcast returns
/// (the paper's worker judges its own gradient; v, the gradient plus what the rank still holds back
/// from earlier drops, lets a block whose drops pile up become important and go reliably). The
/// loss ratio is rank 0's (Synchronizer::report_loss): rank 0's push of a unit carries it and the
/// server's broadcast returns it, so every rank classifies the unit's next iteration with it — one
/// iteration behind rank 0's latest loss, alike everywhere. The paper ranks blocks within a tensor;
/// here within a unit, which is the tensor under WholeLayer slicing and a slice of it under P3's.
/// Pair it with priority::ForwardOrder (P3) and codec::Identity (the blocks travel as fp32).
///
/// What it learns (contributions, ratios, loss_0) and its counts live in the Runtime start()
/// returns, owned by the Synchronizer: the policy value holds only its knobs.
///
/// \code
///   using Sync = gs::Synchronizer<gs::slicing::WholeLayer, gs::priority::ForwardOrder,
///                                 gs::codec::Identity, gs::collective::DifferentialPs>;
///   Sync sync{transport, layout, {}, {.collective = {.alpha = 0.3f, .p0 = 1.0f, .block = 1024}}};
///   sync.report_loss(loss);   // each iteration, before the backward pass
///   // or AnyCollective::parse("dgt:alpha=0.3:p0=1:block=1024")
/// \endcode
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../detail/parse.hpp"
#include "../transport/datagram.hpp"
#include "concept.hpp"
#include "differential.hpp"
#include "parameter_server.hpp"
#include "spec.hpp"

namespace gradsync::collective {

struct DifferentialPs {
  float alpha = 0.3f;          ///< contribution momentum, in [0, 1)
  float p0 = 1.0f;             ///< share of important blocks when the loss ratio is 1, > 0 (share capped at 1)
  std::uint32_t block = 1024;  ///< elements per block
  /// Makes the best-effort channel (collective over the transport): UDP by default.
  std::function<std::unique_ptr<transport::BestEffort>(transport::Transport&)> best_effort_channel =
      [](transport::Transport& t) { return std::make_unique<transport::Udp>(t); };

  /// Dropped blocks wait in Job::ctx.residual for the unit's next iteration.
  static constexpr bool holds_back = true;
  /// The blocks travel as raw fp32 (collective::check_accepts).
  static constexpr bool needs_lossless_codec = true;
  static constexpr std::string_view lossless_because = "sends its blocks as raw fp32";

  std::string_view name() const { return "dgt"; }
  std::string describe() const {
    return "dgt:alpha=" + std::to_string(alpha) + ":p0=" + std::to_string(p0) + ":block=" + std::to_string(block);
  }
  /// "dgt[:alpha=A][:p0=P][:block=N]" (AnyCollective::parse), its knobs checked now.
  static DifferentialPs parse(std::string_view text) {
    const auto spec = gradsync::detail::split_policy(text);
    const auto bad = [&] { gradsync::detail::bad_policy("collective", text, Spec::grammar); };
    if (spec.name != "dgt") bad();
    DifferentialPs d;
    for (std::string_view rest = spec.arg; spec.has_arg;) {
      const auto [opt, tail, more] = gradsync::detail::split_policy(rest);
      const auto eq = opt.find('=');
      if (eq == std::string_view::npos) bad();
      const std::string_view key = opt.substr(0, eq), value = opt.substr(eq + 1);
      const char* end = value.data() + value.size();
      bool ok = false;
      if (key == "alpha") ok = std::from_chars(value.data(), end, d.alpha).ptr == end;
      else if (key == "p0") ok = std::from_chars(value.data(), end, d.p0).ptr == end;
      else if (key == "block") ok = std::from_chars(value.data(), end, d.block).ptr == end;
      if (!ok || value.empty()) bad();
      if (!more) break;
      rest = tail;
    }
    d.check();
    return d;
  }
  /// Throws ConfigError naming a knob out of range.
  void check() const {
    if (!(alpha >= 0.0f && alpha < 1.0f)) throw ConfigError("gradsync: dgt alpha " + std::to_string(alpha) + " is not in [0, 1)");
    if (!(p0 > 0.0f && std::isfinite(p0)))
      throw ConfigError("gradsync: dgt p0 " + std::to_string(p0) + " is not a finite number above 0");
    if (block == 0) throw ConfigError("gradsync: dgt block must be at least 1 element");
  }

  std::size_t blocks(std::size_t elements) const { return (elements + block - 1) / block; }
  /// What a rank reports of a unit: out[j] = mean |g + r| over block j of its gradient g and
  /// residual r (empty: none; the last block may be short).
  void magnitudes(std::span<const float> g, std::span<const float> r, std::span<float> out) const {
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::size_t first = j * block, last = std::min<std::size_t>(first + block, g.size());
      float sum = 0;
      for (std::size_t i = first; i < last; ++i) sum += std::abs(g[i] + (r.empty() ? 0.0f : r[i]));
      out[j] = sum / static_cast<float>(last - first);
    }
  }
  /// The share of important blocks at loss ratio loss_t / loss_0 (1 before any loss is known).
  double share(float loss_ratio) const { return std::clamp(double(p0) * double(loss_ratio), 0.0, 1.0); }
  /// C = alpha C + (1 - alpha) mean|g| for every block, given each block's mean|g| (`magnitudes`).
  void observe(std::span<float> contribution, std::span<const float> magnitudes) const {
    if (magnitudes.size() != contribution.size())
      throw UsageError("gradsync: dgt observed " + std::to_string(magnitudes.size()) + " block magnitudes for a unit of " +
                       std::to_string(contribution.size()) + " blocks");
    for (std::size_t j = 0; j < contribution.size(); ++j)
      contribution[j] = alpha * contribution[j] + (1.0f - alpha) * magnitudes[j];
  }
  /// important[j] = 1 for the top ceil(share * blocks) blocks by contribution (ties to the lower
  /// index), 0 for the rest.
  void classify(std::span<const float> contribution, float loss_ratio, std::vector<std::uint8_t>& important) const {
    const auto keep = static_cast<std::size_t>(std::ceil(share(loss_ratio) * double(contribution.size()) - 1e-9));
    std::vector<std::uint32_t> order(contribution.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return contribution[a] > contribution[b]; });
    important.assign(contribution.size(), 0);
    for (std::size_t k = 0; k < keep && k < order.size(); ++k) important[order[k]] = 1;
  }

  /// What became of one unit's blocks on this rank.
  struct Counts {
    std::uint64_t important = 0;    ///< blocks classified important (sent reliably)
    std::uint64_t best_effort = 0;  ///< unimportant blocks (a worker sends them as datagrams, a server holds its own)
    std::uint64_t dropped = 0;      ///< of those, blocks the aggregate left out (kept in this rank's residual)
    std::uint64_t rejected = 0;     ///< datagrams this rank's server refused (corrupt, foreign, duplicate, late)
    std::vector<Counter> named() const {
      return {{"blocks important", important}, {"blocks best-effort", best_effort}, {"blocks dropped", dropped},
              {"datagrams rejected", rejected}};
    }
  };

  /// A rank's DGT: its server thread, its best-effort channel and router, and what it learned.
  class State final : public Serving {
   public:
    State(const DifferentialPs& k, const Setup& setup)
        : Serving(setup), channel(k.best_effort_channel(setup.transport)),
          router(*channel, setup.session, setup.transport.rank(), setup.elements.size()) {
      for (std::size_t elements : setup.elements) units.push_back({std::vector<float>(k.blocks(elements), 0.0f)});
    }

    /// Rank 0's loss_t / loss_0 goes out with its pushes from now on.
    void report_loss(float loss) override {
      if (!(loss > 0.0f) || !std::isfinite(loss)) return;
      if (!(loss_0 > 0.0f)) loss_0 = loss;
      loss_ratio.store(loss / loss_0);
    }
    std::vector<Counter> counters() const override {
      return Counts{total[0].load(), total[1].load(), total[2].load(), total[3].load()}.named();
    }
    std::vector<Counter> counters(std::uint32_t unit) const override { return units.at(unit).counts.named(); }

    /// Checkpoints: every unit's contributions back to back in unit order, then every unit's
    /// loss ratio for its next classification, then loss_0.
    std::size_t state_size() const override {
      std::size_t n = units.size() + 1;
      for (const Learned& u : units) n += u.contribution.size();
      return n;
    }
    void save_state(std::span<float> out) const override {
      for (const Learned& u : units) out = out.subspan(std::ranges::copy(u.contribution, out.begin()).out - out.begin());
      for (std::size_t i = 0; i < units.size(); ++i) out[i] = units[i].ratio;
      out.back() = loss_0;
    }
    void load_state(std::span<const float> in) override {
      for (Learned& u : units) {
        std::ranges::copy(in.first(u.contribution.size()), u.contribution.begin());
        in = in.subspan(u.contribution.size());
      }
      for (std::size_t i = 0; i < units.size(); ++i) units[i].ratio = in[i];
      loss_0 = in.back();
    }

    /// One unit's: per block its contribution, the loss ratio of its next classification (from
    /// its last broadcast), and its last run's counts. Only the executor running the unit touches it.
    struct Learned {
      std::vector<float> contribution;
      float ratio = 1.0f;
      Counts counts;
    };
    void add(const Counts& c) {
      total[0].fetch_add(c.important);
      total[1].fetch_add(c.best_effort);
      total[2].fetch_add(c.dropped);
      total[3].fetch_add(c.rejected);
    }

    std::unique_ptr<transport::BestEffort> channel;
    detail::DatagramRouter router;  // the server thread's
    std::atomic<float> loss_ratio{1.0f};
    float loss_0 = 0.0f;  // report_loss's (the caller's thread)
    std::vector<Learned> units;
    std::atomic<std::uint64_t> total[4] = {};
  };

  /// Checks the knobs, sizes what it learns for the units and opens the best-effort channel
  /// (collective: every rank starts together).
  std::unique_ptr<Runtime> start(const Setup& setup) const {
    check();
    return std::make_unique<State>(*this, setup);
  }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C&, Job& job, Workspace& ws) const {
    if constexpr (!detail::raw_fp32<C>) {
      throw UsageError("gradsync: collective 'dgt' " + std::string(lossless_because) + "; use codec 'fp32'");
    } else {
      auto* s = dynamic_cast<State*>(job.runtime);
      if (!s || job.ctx.residual.size() != job.data.size())
        throw UsageError("gradsync: collective 'dgt' runs under a Synchronizer (its start() opens the best-effort "
                         "channel, and the Synchronizer keeps the residual of dropped blocks)");
      State::Learned& l = s->units.at(job.tag);
      Transfer unit{job, {}, std::vector<float>(l.contribution.size()), s->loss_ratio.load(), {}};
      classify(l.contribution, l.ratio, unit.important);  // from shared information only: alike on every rank
      unit.counts.important = static_cast<std::uint64_t>(std::ranges::count(unit.important, 1));
      magnitudes(job.data, job.ctx.residual, unit.magnitudes);
      std::size_t sent = 0;
      if (t.size() > 1) {
        const int server = ParameterServer::server_of(job.ctx.unit, t.size());
        sent = t.rank() == server ? serve(t, unit, *s) : push(t, unit, ws, server, *s);
        unit.counts.best_effort = static_cast<std::uint64_t>(std::ranges::count(unit.important, 0));
      }
      observe(l.contribution, unit.magnitudes);
      l.ratio = unit.ratio;
      l.counts = unit.counts;
      s->add(unit.counts);
      return sent;
    }
  }

 private:
  /// One unit on its way: its classification, its block magnitudes (this rank's in, the mean over
  /// ranks out), the loss ratio (this rank's in, rank 0's out) and its counts.
  struct Transfer {
    Job& job;
    std::vector<std::uint8_t> important;
    std::vector<float> magnitudes;
    float ratio;
    Counts counts;
  };

  /// Adds the blocks this rank's share of the aggregate left out (now in its residual) to its counts.
  static void count_dropped(Transfer& unit, std::span<const std::uint8_t> dropped_block) {
    unit.counts.dropped += static_cast<std::uint64_t>(std::ranges::count(dropped_block, 1));
  }

  /// A worker: v = gradient + residual; unimportant pieces of v as datagrams, then the important
  /// blocks, the block magnitudes and the loss ratio over the transport; the residual keeps the
  /// pieces the server did not take.
  std::size_t push(transport::Transport& t, Transfer& unit, Workspace& ws, int server, State& s) const {
    Job& job = unit.job;
    const std::span<float> v = job.data, e = job.ctx.residual;
    const detail::Pieces pieces(v.size(), block);
    auto important = [&](std::size_t k) { return unit.important[pieces.block_of(k)] != 0; };
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += e[i];
    std::size_t sent = 0, packed = 0;
    ws.send.resize(std::max(ws.send.size(), 4 * (v.size() + unit.magnitudes.size() + 1)));
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
      detail::PieceHeader h{.session = s.router.session(), .iteration = static_cast<std::int64_t>(job.ctx.iteration),
                            .unit = job.tag, .piece = static_cast<std::uint32_t>(k),
                            .src = static_cast<std::uint32_t>(t.rank()), .count = static_cast<std::uint32_t>(last - first)};
      const std::size_t bytes = sizeof h + 4 * (last - first);
      std::memcpy(datagram + sizeof h, v.data() + first, 4 * (last - first));
      std::memcpy(datagram, &h, sizeof h);
      h.crc = detail::crc_of(std::span<const std::byte>(datagram, bytes));
      std::memcpy(datagram, &h, sizeof h);
      s.channel->send(server, std::span<const std::byte>(datagram, bytes));
      sent += bytes;
    }
    std::memcpy(ws.send.data() + 4 * packed, unit.magnitudes.data(), 4 * unit.magnitudes.size());
    packed += unit.magnitudes.size();
    std::memcpy(ws.send.data() + 4 * packed++, &unit.ratio, 4);
    t.send(server, job.tag, std::span<const std::byte>(ws.send).first(4 * packed));
    sent += 4 * packed;
    // Which pieces the aggregate took from each rank, the magnitudes, the ratio, then the pieces it carries.
    const detail::Broadcast b(pieces, unit.important, t.size());
    ws.recv.resize(std::max(ws.recv.size(), b.head + 4 * v.size()));
    const std::size_t got = t.recv(server, job.tag, ws.recv);
    const std::byte* maps = ws.recv.data();
    if (got < b.maps || got != b.bytes(maps + b.row * static_cast<std::size_t>(server)))
      throw WireError("gradsync: " + t.describe() + ": differential aggregate of " + std::to_string(got) +
                      " bytes from rank " + std::to_string(server) + " (ranks disagree on layout, slicing or policies)");
    std::memcpy(unit.magnitudes.data(), ws.recv.data() + b.maps, 4 * unit.magnitudes.size());
    std::memcpy(&unit.ratio, ws.recv.data() + b.head - 4, 4);
    std::size_t at = b.head;
    b.each(maps + b.row * static_cast<std::size_t>(server), [&](std::size_t first, std::size_t last, bool carried) {
      if (!carried) return std::fill(v.begin() + first, v.begin() + last, 0.0f);
      std::memcpy(v.data() + first, ws.recv.data() + at, 4 * (last - first));
      at += 4 * (last - first);
    });
    const std::byte* taken = maps + b.row * static_cast<std::size_t>(t.rank());
    std::vector<std::uint8_t> dropped_block(unit.important.size(), 0);
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first == last || important(k)) continue;
      if (detail::Broadcast::bit(taken, k)) std::fill(e.begin() + first, e.begin() + last, 0.0f);
      else dropped_block[pieces.block_of(k)] = 1;
    }
    count_dropped(unit, dropped_block);
    return sent;
  }

  /// The server: its thread collects the pushes (Collecting), then the unit is served here.
  std::size_t serve(transport::Transport& t, Transfer& unit, State& s) const {
    Collecting c(t, unit, block, s.router);
    s.server.serve(c);
    unit.counts.rejected += c.rejected;
    count_dropped(unit, c.dropped_block);
    return c.sent;
  }

  /// The server's side of a DGT unit: every worker's important push (with its block magnitudes and
  /// loss ratio), and the pieces that arrive before the last of them.
  struct Collecting final : Served {
    Collecting(transport::Transport& t, Transfer& unit, std::size_t block, detail::DatagramRouter& router)
        : Served(t, unit.job.tag, unit.job.priority), unit(unit), job(unit.job), router(router),
          pieces(job.data.size(), block),
          taken(static_cast<std::size_t>(t.size()), std::vector<std::uint8_t>(pieces.count, 0)),
          stage(static_cast<std::size_t>(t.size()), std::vector<float>(job.data.size(), 0.0f)),
          reported(static_cast<std::size_t>(t.size())),
          pushed(static_cast<std::size_t>(t.size()), 0),
          inbox{static_cast<std::int64_t>(job.ctx.iteration), job.tag, &pieces, unit.important, &taken, &stage} {
      pushed[static_cast<std::size_t>(t.rank())] = 1;
      for (std::size_t k = 0; k < pieces.count; ++k)
        if (unit.important[pieces.block_of(k)]) important_elements += pieces.range(k).second - pieces.range(k).first;
    }
    bool poll() override {
      if (!opened) {  // on the server's thread: the router is its alone
        router.open(inbox);
        opened = true;
      }
      router.pump();
      const std::size_t blocks = unit.magnitudes.size(), expected = 4 * (important_elements + blocks + 1);
      in.resize(important_elements + blocks + 1);
      for (int w = 0; w < t_.size(); ++w) {
        if (pushed[static_cast<std::size_t>(w)]) continue;
        const auto got = t_.try_recv(w, tag_, std::as_writable_bytes(std::span(in)));
        if (!got) continue;
        if (*got != expected)
          throw WireError("gradsync: differential push of " + std::to_string(*got) + " bytes from rank " +
                          std::to_string(w) + ", expected " + std::to_string(expected) +
                          " (ranks disagree on the classification: same dgt knobs on every rank?)");
        reported[static_cast<std::size_t>(w)].assign(in.end() - static_cast<std::ptrdiff_t>(blocks + 1), in.end() - 1);
        if (w == 0) unit.ratio = in.back();
        std::size_t at = 0;
        for (std::size_t k = 0; k < pieces.count; ++k) {
          const auto [first, last] = pieces.range(k);
          if (first == last || !unit.important[pieces.block_of(k)]) continue;
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
      dropped_block.assign(unit.important.size(), 0);
      for (std::size_t k = 0; k < pieces.count; ++k) {
        const auto [first, last] = pieces.range(k);
        if (first == last) continue;
        bool kept = unit.important[pieces.block_of(k)] != 0;
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
      std::vector<float>& magnitudes = unit.magnitudes;
      reported[static_cast<std::size_t>(r)].assign(magnitudes.begin(), magnitudes.end());
      for (std::size_t j = 0; j < magnitudes.size(); ++j) {
        float sum = 0;
        for (const auto& m : reported) sum += m[j];
        magnitudes[j] = sum / static_cast<float>(n);
      }
      const detail::Broadcast b(pieces, unit.important, n);
      std::vector<std::byte> out(b.head);
      std::memcpy(out.data() + b.maps, magnitudes.data(), 4 * magnitudes.size());
      std::memcpy(out.data() + b.head - 4, &unit.ratio, 4);  // rank 0's: its push's, or this rank's own
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

    Transfer& unit;
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
};
GRADSYNC_CHECK_COLLECTIVE(DifferentialPs);

}  // namespace gradsync::collective
