#pragma once
/// What DGT keeps on a rank between units (collective::DifferentialPs, differential_ps.hpp): its
/// server thread, its best-effort channel and the router that reads it, what it learned per unit
/// (contributions, the loss ratio of the next classification) and its counts, with the checkpoint
/// of what it learned. The Synchronizer owns it, so the policy value holds only its knobs; and the
/// one unit in flight (DifferentialTransfer) that the worker's push and the server share.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "../transport/datagram.hpp"
#include "concept.hpp"
#include "differential.hpp"
#include "parameter_server.hpp"

namespace gradsync::collective {

/// What became of one unit's blocks on this rank (DifferentialPs::Counts).
struct DifferentialCounts {
  std::uint64_t important = 0;    ///< blocks classified important (sent reliably)
  std::uint64_t best_effort = 0;  ///< unimportant blocks (a worker sends them as datagrams, a server holds its own)
  std::uint64_t dropped = 0;      ///< of those, blocks the aggregate left out (kept in this rank's residual)
  std::uint64_t rejected = 0;     ///< datagrams this rank's server refused (corrupt, foreign, duplicate, late)
  std::vector<Counter> named() const {
    return {{"blocks important", important}, {"blocks best-effort", best_effort}, {"blocks dropped", dropped},
            {"datagrams rejected", rejected}};
  }
};

/// A rank's DGT (DifferentialPs::State): its server thread, its best-effort channel and router,
/// and what it learned.
class DifferentialState final : public Serving {
 public:
  /// `make_channel` opens the best-effort channel (collective: every rank starts together);
  /// `block`: elements per block, which sizes each unit's contributions.
  DifferentialState(const Setup& setup,
                    const std::function<std::unique_ptr<transport::BestEffort>(transport::Transport&)>& make_channel,
                    std::uint32_t block)
      : Serving(setup), channel(make_channel(setup.transport)),
        router(*channel, setup.session, setup.transport.rank(), setup.elements.size()) {
    for (std::size_t elements : setup.elements) units.push_back({std::vector<float>((elements + block - 1) / block, 0.0f)});
  }

  /// Rank 0's loss_t / loss_0 goes out with its pushes from now on.
  void report_loss(float loss) override {
    if (!(loss > 0.0f) || !std::isfinite(loss)) return;
    if (!(loss_0 > 0.0f)) loss_0 = loss;
    loss_ratio.store(loss / loss_0);
  }
  std::vector<Counter> counters() const override {
    return DifferentialCounts{total[0].load(), total[1].load(), total[2].load(), total[3].load()}.named();
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
    DifferentialCounts counts;
  };
  void add(const DifferentialCounts& c) {
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

namespace detail {

/// One unit on its way: its classification, its block magnitudes (this rank's in, the mean over
/// ranks out), the loss ratio (this rank's in, rank 0's out) and its counts.
struct DifferentialTransfer {
  Job& job;
  std::vector<std::uint8_t> important;
  std::vector<float> magnitudes;
  float ratio;
  DifferentialCounts counts;

  /// Adds the blocks this rank's share of the aggregate left out (now in its residual) to the counts.
  void count_dropped(std::span<const std::uint8_t> dropped_block) {
    counts.dropped += static_cast<std::uint64_t>(std::ranges::count(dropped_block, 1));
  }
};

}  // namespace detail
}  // namespace gradsync::collective
