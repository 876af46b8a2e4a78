#pragma once
/// Unit: what is sent as one piece — a slice of a layer, a whole layer, or several small layers
/// fused together. Slicing policies produce units; priorities rank them; collectives move them.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradsync {

/// A contiguous range of one layer's elements.
struct Segment {
  std::uint32_t layer = 0;
  std::size_t offset = 0;
  std::size_t length = 0;
};

struct Unit {
  std::vector<Segment> segments;  ///< one for a slice or a whole layer, several when fused
  std::size_t elements = 0;       ///< sum of the segments' lengths

  /// The first layer of the forward pass this unit carries (smallest layer index).
  std::uint32_t first_layer() const {
    std::uint32_t l = segments.front().layer;
    for (const auto& s : segments) l = s.layer < l ? s.layer : l;
    return l;
  }
  bool fused() const { return segments.size() > 1; }
};

}  // namespace gradsync
