#pragma once
/// Per-bucket reductions written so the compiler vectorizes them without -ffast-math:
/// 16 independent partial sums (a fixed, thread-count-independent summation order).
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"

namespace gradsync::codec::detail {

inline constexpr std::size_t reduce_lanes = 16;

/// Sum of term(i) over i in [0, len).
template <class Term>
GRADSYNC_HD float lane_sum(std::size_t len, const Term& term) {
  float acc[reduce_lanes] = {};
  std::size_t i = 0;
  for (; i + reduce_lanes <= len; i += reduce_lanes)
    for (std::size_t l = 0; l < reduce_lanes; ++l) acc[l] += term(i + l);
  for (std::size_t l = 0; i + l < len; ++l) acc[l] += term(i + l);
  float s = 0.0f;
  for (std::size_t l = 0; l < reduce_lanes; ++l) s += acc[l];
  return s;
}

/// max |x[i]|, as an integer max over the magnitude bits (monotonic for floats); a NaN wins.
GRADSYNC_HD inline float max_abs(const float* x, std::size_t len) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < len; ++i) {
    const std::uint32_t a = float_bits(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return bits_float(m);
}

}  // namespace gradsync::codec::detail
