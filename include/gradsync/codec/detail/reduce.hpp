#pragma once
/// Per-bucket reductions in a fixed order that every backend reproduces bit for bit: the host
/// runs them whole per bucket; the CUDA twin (cuda/codec.cuh) splits the same steps over the
/// threads of one block. Written so the compiler vectorizes them without -ffast-math.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"

namespace gradsync::codec::detail {

inline constexpr std::size_t reduce_lanes = 16;

/// The magnitude bits of x: monotonic in |x| when compared as integers (a NaN is above +inf).
GRADSYNC_HD inline std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7fffffffu; }

/// Lane `lane` of sum_squares: x[i]^2 for i = lane, lane + 16, ... accumulated in index order.
/// fmaf rather than `acc + x * x`: whether a compiler fuses that differs by target and flags;
/// fmaf gives the same bits on every host and device. `x` is anything with x[i] -> float (a
/// pointer, or a device codec's view that computes the values it encodes).
template <class X>
GRADSYNC_HD float lane_sum_squares(const X& x, std::size_t len, std::size_t lane) {
  float acc = 0.0f;
  for (std::size_t i = lane; i < len; i += reduce_lanes) acc = fmaf(x[i], x[i], acc);
  return acc;
}

/// The lanes added in order 0..15.
GRADSYNC_HD inline float fold_lanes(const float* acc) {
  float s = 0.0f;
  for (std::size_t l = 0; l < reduce_lanes; ++l) s += acc[l];
  return s;
}

/// Sum of x[i]^2 over [0, len): 16 lanes (lane_sum_squares, here interleaved so it vectorizes),
/// then fold_lanes.
GRADSYNC_HD inline float sum_squares(const float* x, std::size_t len) {
  float acc[reduce_lanes] = {};
  std::size_t i = 0;
  for (; i + reduce_lanes <= len; i += reduce_lanes)
    for (std::size_t l = 0; l < reduce_lanes; ++l) acc[l] = fmaf(x[i + l], x[i + l], acc[l]);
  for (std::size_t l = 0; i + l < len; ++l) acc[l] = fmaf(x[i + l], x[i + l], acc[l]);
  return fold_lanes(acc);
}

/// max |x[i]|, as an integer max over the magnitude bits: exact in any order; a NaN wins.
GRADSYNC_HD inline float max_abs(const float* x, std::size_t len) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < len; ++i) {
    const std::uint32_t a = magnitude_bits(x[i]);
    m = a > m ? a : m;
  }
  return bits_float(m);
}

}  // namespace gradsync::codec::detail
