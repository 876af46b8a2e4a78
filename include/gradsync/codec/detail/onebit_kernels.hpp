#pragma once
/// 1bitSGD kernels, one reshaped bucket per kernel index. Payload layout, bucket after bucket:
///
///   float avg_plus   mean of the bucket's values >= 0 (0 when there are none)
///   float avg_minus  mean of the values < 0 (0 when there are none)
///   ceil(len / 32) 32-bit words: bit j of word w set <=> element 32w + j is negative
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"
#include "reduce.hpp"

namespace gradsync::codec::detail {

inline constexpr std::size_t onebit_record_bytes(std::size_t len) { return 8 + (len + 31) / 32 * 4; }

/// \tparam Feedback add the residual first and leave the new quantization error in it
template <bool Feedback>
struct OneBitEncodeKernel {
  const float* in;
  float* residual;  // used only when Feedback
  std::byte* out;
  std::size_t n;
  std::size_t bucket;

  GRADSYNC_HD void operator()(std::size_t b) const {
    const auto [begin, len] = bucket_range(b, bucket, n);
    const float* v = in + begin;
    if constexpr (Feedback) {
      float* r = residual + begin;
      for (std::size_t i = 0; i < len; ++i) r[i] += v[i];  // the residual now holds v + e
      v = r;
    }
    const float pos_count = lane_sum(len, [v](std::size_t i) { return v[i] >= 0.0f ? 1.0f : 0.0f; });
    const float pos_sum = lane_sum(len, [v](std::size_t i) { return v[i] >= 0.0f ? v[i] : 0.0f; });
    const float neg_sum = lane_sum(len, [v](std::size_t i) { return v[i] >= 0.0f ? 0.0f : v[i]; });
    const float neg_count = static_cast<float>(len) - pos_count;
    const float plus = pos_count > 0.0f ? pos_sum / pos_count : 0.0f;
    const float minus = neg_count > 0.0f ? neg_sum / neg_count : 0.0f;
    std::byte* rec = out + b * onebit_record_bytes(bucket);
    store(rec, plus);
    store(rec + 4, minus);
    for (std::size_t w = 0; w * 32 < len; ++w) {
      const std::size_t m = len - w * 32 < 32 ? len - w * 32 : 32;
      std::uint32_t bits = 0;
      for (std::size_t j = 0; j < m; ++j) bits |= static_cast<std::uint32_t>(v[w * 32 + j] < 0.0f) << j;
      store(rec + 8 + 4 * w, bits);
    }
    if constexpr (Feedback) {
      float* r = residual + begin;
      for (std::size_t i = 0; i < len; ++i) r[i] -= r[i] < 0.0f ? minus : plus;
    }
  }
};

template <bool Add>
struct OneBitDecodeKernel {
  const std::byte* in;
  float* out;
  std::size_t n;
  std::size_t bucket;

  GRADSYNC_HD void operator()(std::size_t b) const {
    const auto [begin, len] = bucket_range(b, bucket, n);
    const std::byte* rec = in + b * onebit_record_bytes(bucket);
    const float plus = load<float>(rec), minus = load<float>(rec + 4);
    float* o = out + begin;
    for (std::size_t w = 0; w * 32 < len; ++w) {
      const std::size_t m = len - w * 32 < 32 ? len - w * 32 : 32;
      const std::uint32_t bits = load<std::uint32_t>(rec + 8 + 4 * w);
      for (std::size_t j = 0; j < m; ++j) {
        const float v = (bits >> j) & 1u ? minus : plus;
        o[w * 32 + j] = Add ? o[w * 32 + j] + v : v;
      }
    }
  }
};

}  // namespace gradsync::codec::detail
