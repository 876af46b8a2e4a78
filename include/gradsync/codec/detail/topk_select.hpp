#pragma once
/// Host selection of the k largest magnitudes for TopK. A most-significant-digit radix select
/// on the magnitude bits (monotonic for floats): three histogram passes (11, 11, 10 bits) find
/// the k-th largest magnitude exactly in O(n), with no sort and no extra copy of the data.
/// The CUDA twin will use CUB's radix passes for the same threshold; the gather/scatter
/// around it are plain loops here.
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"

namespace gradsync::codec::detail {

/// Keep every element with magnitude bits > key, and the first `ties` (by index) equal to it.
struct TopKThreshold {
  std::uint32_t key;
  std::size_t ties;
};

/// Requires 1 <= k <= n.
inline TopKThreshold topk_threshold(const float* v, std::size_t n, std::size_t k) {
  constexpr unsigned shift[3] = {21, 10, 0};
  constexpr unsigned width[3] = {11, 11, 10};
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::size_t above = 0;  // elements known to be strictly larger than the current prefix range
  for (int pass = 0; pass < 3; ++pass) {
    const std::uint32_t digit_mask = (1u << width[pass]) - 1;
    std::uint32_t hist[1u << 11] = {};
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = float_bits(v[i]) & 0x7fffffffu;
      if ((a & prefix_mask) == prefix) ++hist[(a >> shift[pass]) & digit_mask];
    }
    std::uint32_t d = digit_mask;
    for (; d > 0 && above + hist[d] < k; --d) above += hist[d];
    prefix |= d << shift[pass];
    prefix_mask |= digit_mask << shift[pass];
  }
  return {prefix, k - above};
}

}  // namespace gradsync::codec::detail
