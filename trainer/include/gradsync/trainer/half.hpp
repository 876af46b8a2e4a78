#pragma once
// fp16 storage emulation: a float rounded to the nearest IEEE binary16 value (ties to even,
// overflow to Inf, subnormals kept) and back, with the fp16 codec's conversions. Mixed precision
// on the host rounds weights, activations and gradients with it, so the host run sees exactly the
// values a device run stores in fp16 while accumulating in fp32 - and overflows where it would.
#include <cmath>

#include <gradsync/codec/half.hpp>

#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/tensor.hpp"

namespace gradsync::trainer {

/// Largest finite fp16 value.
inline constexpr float half_max = 65504.0f;

/// The fp16 codec's conversion there and back: the value fp16 storage holds.
GRADSYNC_HD inline float round_to_half(float x) { return codec::round_to_fp16(x); }

namespace kernels {
/// y = the fp16 value of x (y may be x).
struct RoundToHalf {
  const float* x; float* y;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = round_to_half(x[i]); }
};
/// y = the fp16 value of x * scale (the scaled loss gradient).
struct ScaleToHalf {
  const float* x; float* y; float scale;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = round_to_half(x[i] * scale); }
};
/// A reduce_rows term over g[0, n) viewed as rows of `cols`: unscales the element in place
/// (g *= inv) and counts it if it is Inf or NaN (past n: nothing, 0). reduce_rows visits every
/// term once on either backend, so one pass both unscales and checks.
struct UnscaleCount {
  float* g; std::size_t n, cols; float inv;
  GRADSYNC_HD float operator()(std::size_t row, std::size_t j) const {
    const std::size_t i = row * cols + j;
    if (i >= n) return 0.0f;
    const float v = g[i];
    g[i] = v * inv;
    return std::isfinite(v) ? 0.0f : 1.0f;
  }
};
}  // namespace kernels

/// In place: every value of t becomes its fp16 value (what fp16 storage of t would hold).
void round_to_half(Tensor& t);

}  // namespace gradsync::trainer
