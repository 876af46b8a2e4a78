#pragma once
/// Contribution (DGT, Zhou et al.): which blocks of a unit are important. Each unit is cut into
/// blocks of `block` elements (n = 1024 in the paper); a block's contribution is the sliding
/// average C(t) = alpha * C(t-1) + (1 - alpha) * mean|g| (alpha = 0.3, C(0) = 0), and the top p% of
/// a unit's blocks by contribution are important, p = p0 * loss_t / loss_0 (p0 = 1: everything is
/// important at the start, fewer blocks as the loss falls; beyond the paper, p0 > 1 keeps every
/// block important until the loss falls below loss_0 / p0, and p0 times as many after: it trades
/// batch completion time for accuracy per iteration). Important blocks travel reliably; the
/// others best-effort, dropped when late (collective::ParameterServer, collective/differential.hpp).
///
/// Every rank must classify alike, so everything it uses is shared. mean|g| is the mean over ranks
/// of each rank's own mean |v| per block (observe_blocks(), collective::Job::magnitudes, the same
/// bytes on every rank): the paper's worker judges its own gradient, and v, the gradient plus what
/// the rank still holds back from earlier drops, lets a block whose drops pile up become important
/// and go reliably. The loss ratio comes with rank 0's schedule decision (Synchronizer::report_loss).
/// The paper ranks blocks within a tensor; here within a unit, which is the tensor under
/// WholeLayer slicing and a slice of it under P3's. Units go in forward order between them (P3).
///
/// \code
///   using Sync = gs::Synchronizer<gs::slicing::WholeLayer, gs::priority::Contribution,
///                                 gs::codec::Identity, gs::collective::ParameterServer>;
///   Sync sync{transport, layout, {}, {.priority = {.alpha = 0.3f, .p0 = 1.0f, .block = 1024}}};
///   sync.report_loss(loss);   // each iteration, before the backward pass
///   // or AnyPriority::parse("dgt:alpha=0.3:p0=1:block=1024")
/// \endcode
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "concept.hpp"

namespace gradsync::priority {

struct Contribution {
  float alpha = 0.3f;          ///< contribution momentum, in [0, 1)
  float p0 = 1.0f;             ///< share of important blocks when the loss ratio is 1, > 0 (share capped at 1)
  std::uint32_t block = 1024;  ///< elements per block

  std::size_t levels(const ModelLayout& layout) const { return layout.num_layers(); }
  std::uint32_t key(const Unit& u) const { return u.first_layer(); }
  std::string_view name() const { return "dgt"; }
  std::string describe() const {
    return "dgt:alpha=" + std::to_string(alpha) + ":p0=" + std::to_string(p0) + ":block=" + std::to_string(block);
  }

  /// Sizes the contributions for `units` (once, before any observe) and checks the knobs.
  void prepare(const std::vector<Unit>& units) {
    if (!(alpha >= 0.0f && alpha < 1.0f)) throw ConfigError("gradsync: dgt alpha " + std::to_string(alpha) + " is not in [0, 1)");
    if (!(p0 > 0.0f && std::isfinite(p0)))
      throw ConfigError("gradsync: dgt p0 " + std::to_string(p0) + " is not a finite number above 0");
    if (block == 0) throw ConfigError("gradsync: dgt block must be at least 1 element");
    state_ = std::make_shared<std::vector<std::vector<float>>>();
    for (const Unit& u : units) state_->emplace_back(blocks(u.elements), 0.0f);
  }
  /// C(t) = alpha C(t-1) + (1 - alpha) mean|g| for every block of unit `index`, given each block's
  /// mean|g| (`magnitudes`).
  void observe_blocks(std::uint32_t index, std::span<const float> magnitudes) {
    std::vector<float>& c = contributions(index);
    if (magnitudes.size() != c.size())
      throw UsageError("gradsync: dgt observed " + std::to_string(magnitudes.size()) + " block magnitudes for unit " +
                       std::to_string(index) + " of " + std::to_string(c.size()) + " blocks");
    for (std::size_t j = 0; j < c.size(); ++j) c[j] = alpha * c[j] + (1.0f - alpha) * magnitudes[j];
  }
  /// What a rank reports of a unit (collective::Job::magnitudes): out[j] = mean |g + r| over
  /// block j of its gradient g and residual r (the last block may be short).
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
  /// important[j] = 1 for the top ceil(share * blocks) blocks of unit `index` by contribution
  /// (ties to the lower index), 0 for the rest.
  void classify(std::uint32_t index, float loss_ratio, std::vector<std::uint8_t>& important) const {
    const std::vector<float>& c = contributions(index);
    const auto keep = static_cast<std::size_t>(std::ceil(share(loss_ratio) * double(c.size()) - 1e-9));
    std::vector<std::uint32_t> order(c.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return c[a] > c[b]; });
    important.assign(c.size(), 0);
    for (std::size_t k = 0; k < keep && k < order.size(); ++k) important[order[k]] = 1;
  }
  std::uint32_t block_elements() const { return block; }
  std::size_t blocks(std::size_t elements) const { return (elements + block - 1) / block; }
  /// Unit `index`'s contributions, one per block.
  std::span<const float> contribution(std::uint32_t index) const { return contributions(index); }

  /// Checkpoints (priority::save_state): every unit's contributions back to back, in unit order.
  std::size_t state_size() const {
    std::size_t n = 0;
    for (const auto& c : all()) n += c.size();
    return n;
  }
  void save_state(std::span<float> out) const {
    for (const auto& c : all()) {
      std::ranges::copy(c, out.begin());
      out = out.subspan(c.size());
    }
  }
  void load_state(std::span<const float> in) {
    if (in.size() != state_size())
      throw UsageError("gradsync: dgt state of " + std::to_string(in.size()) + " contributions, but these units have " +
                       std::to_string(state_size()) + " blocks of " + std::to_string(block) +
                       " (restore state saved with the same model, slicing and dgt block)");
    for (auto& c : all()) {
      std::ranges::copy(in.first(c.size()), c.begin());
      in = in.subspan(c.size());
    }
  }

  /// Internal state, made by prepare(): per unit, per block; copies share it.
  std::shared_ptr<std::vector<std::vector<float>>> state_{};

 private:
  std::vector<std::vector<float>>& all() const {
    if (!state_) throw UsageError("gradsync: priority 'dgt' used before prepare(units) (the Synchronizer calls it)");
    return *state_;
  }
  std::vector<float>& contributions(std::uint32_t index) const { return all().at(index); }
};
GRADSYNC_CHECK_PRIORITY(Contribution);

}  // namespace gradsync::priority
