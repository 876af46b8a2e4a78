#pragma once
/// DGT's maths on one unit's blocks (collective::DifferentialPs, differential_ps.hpp): what a rank
/// reports of each block, the sliding average of those reports (a block's contribution), and which
/// blocks are important. Pure functions of their inputs, so every rank that feeds them the same
/// shared values classifies alike.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"

namespace gradsync::collective::detail {

/// out[j] = mean |g + r| over block j (blocks of `block` elements, the last may be short) of a
/// gradient g and residual r (empty: none).
inline void block_magnitudes(std::size_t block, std::span<const float> g, std::span<const float> r,
                             std::span<float> out) {
  for (std::size_t j = 0; j < out.size(); ++j) {
    const std::size_t first = j * block, last = std::min<std::size_t>(first + block, g.size());
    float sum = 0;
    for (std::size_t i = first; i < last; ++i) sum += std::abs(g[i] + (r.empty() ? 0.0f : r[i]));
    out[j] = sum / static_cast<float>(last - first);
  }
}

/// p0 * loss ratio, capped to [0, 1]: p0 > 1 keeps every block important until the loss falls
/// below loss_0 / p0.
inline double important_share(float p0, float loss_ratio) {
  return std::clamp(double(p0) * double(loss_ratio), 0.0, 1.0);
}

/// C = alpha C + (1 - alpha) mean|g| per block; a report of another block count is a caller's bug.
inline void observe_contribution(float alpha, std::span<float> contribution, std::span<const float> magnitudes) {
  if (magnitudes.size() != contribution.size())
    throw UsageError("gradsync: dgt observed " + std::to_string(magnitudes.size()) + " block magnitudes for a unit of " +
                     std::to_string(contribution.size()) + " blocks");
  for (std::size_t j = 0; j < contribution.size(); ++j)
    contribution[j] = alpha * contribution[j] + (1.0f - alpha) * magnitudes[j];
}

/// important[j] = 1 for the top ceil(share * blocks) blocks by contribution, 0 for the rest. The
/// stable sort sends ties to the lower index, so equal contributions classify alike everywhere.
inline void classify_blocks(double share, std::span<const float> contribution, std::vector<std::uint8_t>& important) {
  const auto keep = static_cast<std::size_t>(std::ceil(share * double(contribution.size()) - 1e-9));
  std::vector<std::uint32_t> order(contribution.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return contribution[a] > contribution[b]; });
  important.assign(contribution.size(), 0);
  for (std::size_t k = 0; k < keep && k < order.size(); ++k) important[order[k]] = 1;
}

}  // namespace gradsync::collective::detail
