#pragma once
/// Fusion (ImageNet in four minutes, tensor fusion): consecutive small layers, in the order
/// backpropagation produces them (last layer first), are packed into one unit of at most
/// `threshold_bytes` of fp32 so that small messages do not pay the per-message latency each.
///
/// SliceAndFuse: P3 slicing for large layers and fusion for small ones, so every unit is close to
/// the slice size: layers above `slice_elements` are sliced, runs of smaller ones fused up to
/// `slice_elements` elements.
#include "fixed_slices.hpp"

namespace gradsync::slicing {

namespace detail {
/// Packs layers from last to first into fused units of at most `max_elements`; a layer larger
/// than `slice_elements` ends the current pack and is sliced (slice_elements == 0: never sliced).
inline std::vector<Unit> fuse(const ModelLayout& layout, std::size_t max_elements, std::size_t slice_elements) {
  std::vector<Unit> units;
  Unit pack;
  auto flush = [&] {
    if (!pack.segments.empty()) units.push_back(std::move(pack));
    pack = {};
  };
  for (std::size_t i = layout.num_layers(); i-- > 0;) {
    const auto l = static_cast<std::uint32_t>(i);
    const std::size_t n = layout.layer(l).elements;
    if (slice_elements != 0 && n > slice_elements) {
      flush();
      slice_layer(units, l, n, slice_elements);
      continue;
    }
    if (pack.elements + n > max_elements) flush();
    pack.segments.push_back({l, 0, n});
    pack.elements += n;
  }
  flush();
  return units;
}
}  // namespace detail

struct Fusion {
  std::size_t threshold_bytes = 1u << 20;

  std::vector<Unit> plan(const ModelLayout& layout) const {
    detail::require_positive(threshold_bytes / sizeof(float), "Fusion::threshold_bytes (at least 4)");
    return detail::fuse(layout, threshold_bytes / sizeof(float), 0);
  }
  std::string describe() const { return "fusion:" + std::to_string(threshold_bytes); }
};
GRADSYNC_CHECK_SLICING(Fusion);

struct SliceAndFuse {
  std::size_t slice_elements = 40'000;

  std::vector<Unit> plan(const ModelLayout& layout) const {
    detail::require_positive(slice_elements, "SliceAndFuse::slice_elements");
    return detail::fuse(layout, slice_elements, slice_elements);
  }
  std::string describe() const { return "slicefuse:" + std::to_string(slice_elements); }
};
GRADSYNC_CHECK_SLICING(SliceAndFuse);

}  // namespace gradsync::slicing
