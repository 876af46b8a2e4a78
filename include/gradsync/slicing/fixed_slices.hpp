#pragma once
/// FixedSlices (P3, section 4.2): each layer is cut into slices of at most `max_elements`
/// parameters, each synchronized on its own. 40,000 is the released P3 code's value (the paper's
/// sweep peaked at 50,000).
#include "../core/error.hpp"
#include "concept.hpp"

namespace gradsync::slicing {

namespace detail {
/// Appends the slices of layer `l` (n elements) of at most `max` elements each.
inline void slice_layer(std::vector<Unit>& units, std::uint32_t l, std::size_t n, std::size_t max) {
  for (std::size_t off = 0; off < n; off += max) {
    const std::size_t len = n - off < max ? n - off : max;
    units.push_back({{{l, off, len}}, len});
  }
}
inline void require_positive(std::size_t v, const char* what) {
  if (v == 0) throw ConfigError(std::string("gradsync: ") + what + " must be positive");
}
}  // namespace detail

struct FixedSlices {
  std::size_t max_elements = 40'000;

  std::vector<Unit> plan(const ModelLayout& layout) const {
    detail::require_positive(max_elements, "FixedSlices::max_elements");
    std::vector<Unit> units;
    for (std::uint32_t l = 0; l < layout.num_layers(); ++l)
      detail::slice_layer(units, l, layout.layer(l).elements, max_elements);
    return units;
  }
  std::string describe() const { return "fixed:" + std::to_string(max_elements); }
};
GRADSYNC_CHECK_SLICING(FixedSlices);

}  // namespace gradsync::slicing
