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
/// unbiased over time. The wire: collective/differential.hpp; the maths on a unit's blocks:
/// differential_contribution.hpp; what a rank keeps between units: differential_state.hpp; a
/// worker's push: differential_push.hpp; the server's side: differential_server.hpp.
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
/// What it learns (contributions, ratios, loss_0) and its counts live in the State start()
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
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../detail/parse.hpp"
#include "../transport/datagram.hpp"
#include "concept.hpp"
#include "differential_contribution.hpp"
#include "differential_push.hpp"
#include "differential_server.hpp"
#include "differential_state.hpp"
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

  /// The blocks travel as raw fp32; dropped ones wait in Job::ctx.residual for the unit's next
  /// iteration.
  static constexpr Traits traits() {
    return {.needs_lossless_codec = true, .lossless_because = "sends its blocks as raw fp32", .holds_back = true};
  }

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

  // DGT's maths with these knobs (collective/differential_contribution.hpp).
  std::size_t blocks(std::size_t elements) const { return (elements + block - 1) / block; }
  /// What a rank reports of a unit: out[j] = mean |g + r| over block j of its gradient g and
  /// residual r (empty: none; the last block may be short).
  void magnitudes(std::span<const float> g, std::span<const float> r, std::span<float> out) const {
    detail::block_magnitudes(block, g, r, out);
  }
  /// The share of important blocks at loss ratio loss_t / loss_0 (1 before any loss is known).
  double share(float loss_ratio) const { return detail::important_share(p0, loss_ratio); }
  /// C = alpha C + (1 - alpha) mean|g| for every block, given each block's mean|g| (`magnitudes`).
  void observe(std::span<float> contribution, std::span<const float> magnitudes) const {
    detail::observe_contribution(alpha, contribution, magnitudes);
  }
  /// important[j] = 1 for the top ceil(share * blocks) blocks by contribution (ties to the lower
  /// index), 0 for the rest.
  void classify(std::span<const float> contribution, float loss_ratio, std::vector<std::uint8_t>& important) const {
    detail::classify_blocks(share(loss_ratio), contribution, important);
  }

  /// What became of one unit's blocks on this rank.
  using Counts = DifferentialCounts;
  /// A rank's DGT: its server thread, its best-effort channel and router, and what it learned
  /// (collective/differential_state.hpp).
  using State = DifferentialState;

  /// Checks the knobs, sizes what it learns for the units and opens the best-effort channel
  /// (collective: every rank starts together).
  std::unique_ptr<State> start(const Setup& setup) const {
    check();
    return std::make_unique<State>(setup, best_effort_channel, block);
  }

  /// Classifies the unit's blocks from what every rank shares, pushes it to its server or serves
  /// it (collective/differential_push.hpp, differential_server.hpp), then learns from the
  /// broadcast: the mean block magnitudes and rank 0's loss ratio.
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C&, Job& job, Workspace& ws, State& s) const {
    if constexpr (!detail::raw_fp32<C>) {
      throw UsageError("gradsync: collective 'dgt' " + std::string(traits().lossless_because) + "; use codec 'fp32'");
    } else {
      if (job.ctx.residual.size() != job.data.size())
        throw UsageError("gradsync: collective 'dgt' runs under a Synchronizer (it keeps the residual of dropped "
                         "blocks)");
      State::Learned& l = s.units.at(job.tag);
      detail::DifferentialTransfer unit{job, {}, std::vector<float>(l.contribution.size()), s.loss_ratio.load(), {}};
      classify(l.contribution, l.ratio, unit.important);  // from shared information only: alike on every rank
      unit.counts.important = static_cast<std::uint64_t>(std::ranges::count(unit.important, 1));
      magnitudes(job.data, job.ctx.residual, unit.magnitudes);
      std::size_t sent = 0;
      if (t.size() > 1) {
        const int server = ParameterServer::server_of(job.ctx.unit, t.size());
        sent = t.rank() == server ? detail::differential_serve(t, unit, s, block)
                                  : detail::differential_push(t, unit, ws, server, s, block);
        unit.counts.best_effort = static_cast<std::uint64_t>(std::ranges::count(unit.important, 0));
      }
      observe(l.contribution, unit.magnitudes);
      l.ratio = unit.ratio;
      l.counts = unit.counts;
      s.add(unit.counts);
      return sent;
    }
  }
};
GRADSYNC_CHECK_COLLECTIVE(DifferentialPs);

}  // namespace gradsync::collective
