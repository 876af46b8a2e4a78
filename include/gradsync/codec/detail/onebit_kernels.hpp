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

/// Running sums of a bucket, 32 lanes wide: the count and sum of the non-negative values and
/// the sum of all. Fixed-size loops over 32 elements vectorize and inline; fp order is fixed.
/// Lane j takes elements j, 32 + j, 64 + j, ... in order (first, then add), then fold() adds
/// the lanes pairwise; the device (cuda/detail/onebit_team.hpp) runs the lanes on 8 threads.
struct SignSums {
  std::uint32_t count[32];
  float plus[32], total[32];

  // Masks instead of `p ? x : 0`: GCC (with the default -ftrapping-math) keeps a conditional
  // float add as a branch, which stops vectorization.
  GRADSYNC_HD static std::uint32_t keep(float v) { return 0u - static_cast<std::uint32_t>(v >= 0.0f); }
  /// Lane j's first element (starting from it, not from zeros: zeroing 384 bytes per bucket
  /// costs more than the sums).
  GRADSYNC_HD static void first(std::uint32_t& count, float& plus, float& total, float v) {
    count = keep(v) & 1u;
    plus = bits_float(float_bits(v) & keep(v));
    total = v;
  }
  /// Lane j's next element.
  GRADSYNC_HD static void next(std::uint32_t& count, float& plus, float& total, float v) {
    count += keep(v) & 1u;
    plus += bits_float(float_bits(v) & keep(v));
    total += v;
  }

  SignSums() = default;
  GRADSYNC_HD explicit SignSums(const float* v) {
    for (std::uint32_t j = 0; j < 32; ++j) first(count[j], plus[j], total[j], v[j]);
  }
  GRADSYNC_HD void add(const float* v) {
    for (std::uint32_t j = 0; j < 32; ++j) next(count[j], plus[j], total[j], v[j]);
  }
  /// Folds the 32 lanes pairwise (a fixed order, vectorizable) into lane 0.
  GRADSYNC_HD void fold() {
    for (std::uint32_t h = 16; h > 0; h /= 2)
      for (std::uint32_t j = 0; j < h; ++j) {
        count[j] += count[j + h];
        plus[j] += plus[j + h];
        total[j] += total[j + h];
      }
  }
};

/// The record's two values from a folded bucket of len values in `words` words (the last word
/// padded with zeros, which counted as non-negative): the mean of the non-negative values and of
/// the negative ones (0 where there are none).
struct SignMeans {
  float plus, minus;
};
GRADSYNC_HD inline SignMeans sign_means(std::uint32_t count, float plus, float total, std::size_t len, std::size_t words) {
  const std::size_t nonneg = count - (words * 32 - len);  // less the padding zeros
  const auto pos_count = static_cast<float>(nonneg), neg_count = static_cast<float>(len - nonneg);
  return {pos_count > 0.0f ? plus / pos_count : 0.0f, neg_count > 0.0f ? (total - plus) / neg_count : 0.0f};
}
GRADSYNC_HD inline SignMeans sign_means(const SignSums& folded, std::size_t len, std::size_t words) {
  return sign_means(folded.count[0], folded.plus[0], folded.total[0], len, words);
}

/// Bit j set <=> v[j] < 0 (so -0.0 counts as non-negative).
GRADSYNC_HD inline std::uint32_t negative_bits(const float* v) {
  std::uint32_t bits = 0;
  for (std::uint32_t j = 0; j < 32; ++j) bits |= static_cast<std::uint32_t>(v[j] < 0.0f) << j;
  return bits;
}

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
    // Whole words of 32 values; a partial last word is copied into zeros, which count as
    // non-negative (their bits stay 0) and are taken off the count again.
    const std::size_t words = (len + 31) / 32, full = len / 32;
    float tail[32];
    if (full < words) {
      for (std::size_t i = 0; i < 32; ++i) tail[i] = full * 32 + i < len ? v[full * 32 + i] : 0.0f;
    }
    const auto word = [&](std::size_t w) { return w < full ? v + 32 * w : tail; };

    SignSums sums(word(0));  // a unit is never empty
    for (std::size_t w = 1; w < words; ++w) sums.add(word(w));
    sums.fold();
    const auto [plus, minus] = sign_means(sums, len, words);

    std::byte* rec = out + b * onebit_record_bytes(bucket);
    store(rec, plus);
    store(rec + 4, minus);
    for (std::size_t w = 0; w < words; ++w) store(rec + 8 + 4 * w, negative_bits(word(w)));
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
    std::size_t w = 0;
    for (; w * 32 + 32 <= len; ++w) unpack(load<std::uint32_t>(rec + 8 + 4 * w), plus, minus, o + w * 32);
    if (w * 32 < len) {
      float tail[32];
      for (std::size_t i = w * 32; i < len; ++i) tail[i - w * 32] = Add ? o[i] : 0.0f;
      unpack(load<std::uint32_t>(rec + 8 + 4 * w), plus, minus, tail);
      for (std::size_t i = w * 32; i < len; ++i) o[i] = tail[i - w * 32];
    }
  }

  GRADSYNC_HD static void unpack(std::uint32_t bits, float plus, float minus, float* dst) {
    for (std::uint32_t j = 0; j < 32; ++j) {
      const float v = (bits >> j) & 1u ? minus : plus;
      dst[j] = Add ? dst[j] + v : v;
    }
  }
};

}  // namespace gradsync::codec::detail
