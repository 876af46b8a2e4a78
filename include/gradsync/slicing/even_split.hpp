#pragma once
/// EvenSplit: MXNet KVStore's sharding, the baseline P3 measures against (P3, section 4.1):
/// a layer of at least `min_elements` parameters (10^6 by default) is split into `parts` equal
/// slices, one per parameter-server shard; smaller layers stay whole. Unlike P3's slicing, the
/// size of a slice grows with the layer.
#include "fixed_slices.hpp"

namespace gradsync::slicing {

struct EvenSplit {
  std::size_t parts = 4;                 ///< the shards (KVServers) a large layer is spread over
  std::size_t min_elements = 1'000'000;  ///< layers from this size are split

  std::vector<Unit> plan(const ModelLayout& layout) const {
    detail::require_positive(parts, "EvenSplit::parts");
    detail::require_positive(min_elements, "EvenSplit::min_elements");
    std::vector<Unit> units;
    for (std::uint32_t l = 0; l < layout.num_layers(); ++l) {
      const std::size_t n = layout.layer(l).elements;
      detail::slice_layer(units, l, n, n >= min_elements ? (n + parts - 1) / parts : std::max<std::size_t>(n, 1));
    }
    return units;
  }
  std::string describe() const { return "split:" + std::to_string(parts) + ":" + std::to_string(min_elements); }
};
GRADSYNC_CHECK_SLICING(EvenSplit);

}  // namespace gradsync::slicing
