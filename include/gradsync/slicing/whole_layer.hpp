#pragma once
/// WholeLayer: one unit per layer, the framework baseline (no slicing, no fusion).
#include "concept.hpp"

namespace gradsync::slicing {

struct WholeLayer {
  std::vector<Unit> plan(const ModelLayout& layout) const {
    std::vector<Unit> units;
    for (std::uint32_t l = 0; l < layout.num_layers(); ++l)
      units.push_back({{{l, 0, layout.layer(l).elements}}, layout.layer(l).elements});
    return units;
  }
  std::string describe() const { return "whole"; }
};
GRADSYNC_CHECK_SLICING(WholeLayer);

}  // namespace gradsync::slicing
