#pragma once
/// QSGD kernels, one bucket per kernel index. Payload layout, bucket after bucket:
///
///   float scale (max |v| or ||v||_2 of the bucket)
///   groups of 128 elements, each 4*Bits 32-bit words; element o of a group lives in word
///   o % (4*Bits), field o / (4*Bits): Bits wide, sign in its top bit, level q in [0, s] below.
///   A bucket's last group is zero-padded; bucket sizes are multiples of 128.
///
/// The striped field order makes packing a stride-1 loop over words (vectorizes on a CPU,
/// coalesces on a GPU) while keeping the density at exactly Bits per element.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"
#include "reduce.hpp"
#include "rng.hpp"

namespace gradsync::codec::detail {

/// Layout constants of one bit width.
/// \tparam Bits bits per element, sign included
template <unsigned Bits>
struct QsgdLayout {
  static constexpr std::uint32_t levels = (1u << (Bits - 1)) - 1;  // s: levels 0, 1/s, ..., 1
  static constexpr std::uint32_t group = 128;                      // elements per packed group
  static constexpr std::uint32_t fields = 32 / Bits;               // fields per word
  static constexpr std::uint32_t words = group / fields;           // words per group
  static constexpr std::size_t group_bytes = words * 4;
  static constexpr std::size_t record_bytes(std::size_t len) { return 4 + (len + group - 1) / group * group_bytes; }
};

/// The scale of a bucket: max |v| or ||v||_2, in reduce.hpp's fixed order.
GRADSYNC_HD inline float qsgd_scale(const float* v, std::size_t len, bool l2) {
  return l2 ? sqrtf(sum_squares(v, len)) : max_abs(v, len);
}

/// The Bits-wide field of one value: sign in the top bit, level q below. Stochastic rounding:
/// q = floor(r + u) with u uniform in [0, 1) is l + 1 with probability r - l, so E[q] = r (and
/// needs no branch: it vectorizes). `index`: the element's index in the unit (its RNG counter).
template <unsigned Bits>
GRADSYNC_HD inline std::uint32_t qsgd_field(float x, float mult, std::uint64_t key, std::uint32_t index) {
  constexpr auto s = static_cast<std::int32_t>(QsgdLayout<Bits>::levels);
  const std::uint32_t bits = float_bits(x);
  float r = bits_float(bits & 0x7fffffffu) * mult;
  r = r < static_cast<float>(s) ? r : static_cast<float>(s);  // r <= s already; maps NaN too
  auto q = static_cast<std::int32_t>(r + uniform(key, index));
  q = q < s ? q : s;  // r + u can round up to s + 1 in float
  return static_cast<std::uint32_t>(q) | (bits >> 31) << (Bits - 1);
}
/// levels / scale: the factor that maps |v| to [0, levels].
template <unsigned Bits>
GRADSYNC_HD inline float qsgd_mult(float scale) {
  return scale > 0.0f ? static_cast<float>(QsgdLayout<Bits>::levels) / scale : 0.0f;
}

/// The value of a Bits-wide field (sign in its top bit, level below) for `step` = scale / levels.
template <unsigned Bits>
GRADSYNC_HD inline float qsgd_value(std::uint32_t field, float step) {
  const float mag = static_cast<float>(static_cast<std::int32_t>(field & QsgdLayout<Bits>::levels)) * step;
  return bits_float(float_bits(mag) | (field >> (Bits - 1)) << 31);
}

/// Quantizes and packs group g (elements [128g, 128g + 128) of a bucket of len values starting
/// at v, element index `first` of the unit) into `groups` (the bucket's record after its scale).
template <unsigned Bits>
GRADSYNC_HD void qsgd_pack_group(const float* v, std::size_t len, std::size_t first, std::size_t g, float scale,
                                 std::uint64_t key, std::byte* groups) {
  using L = QsgdLayout<Bits>;
  const float mult = qsgd_mult<Bits>(scale);
  float tail[L::group];
  const float* x = v + g * L::group;
  if ((g + 1) * L::group > len) {  // the bucket's last, partial group: zero-padded
    for (std::size_t i = 0; i < L::group; ++i) tail[i] = g * L::group + i < len ? x[i] : 0.0f;
    x = tail;
  }
  first += g * L::group;
  std::uint32_t w[L::words] = {};
  for (std::uint32_t f = 0; f < L::fields; ++f)
    for (std::uint32_t k = 0; k < L::words; ++k) {
      const std::uint32_t o = f * L::words + k;
      w[k] |= qsgd_field<Bits>(x[o], mult, key, static_cast<std::uint32_t>(first + o)) << (f * Bits);
    }
  memcpy(groups + g * L::group_bytes, w, sizeof w);
}

/// Host encode, one bucket per index: its scale, then its groups.
template <unsigned Bits>
struct QsgdEncodeKernel {
  using L = QsgdLayout<Bits>;
  const float* in;
  std::byte* out;
  std::size_t n;
  std::size_t bucket;
  bool l2;
  std::uint64_t key;

  GRADSYNC_HD void operator()(std::size_t b) const {
    const auto [begin, len] = bucket_range(b, bucket, n);
    const float scale = qsgd_scale(in + begin, len, l2);
    std::byte* rec = out + b * L::record_bytes(bucket);
    store(rec, scale);
    for (std::size_t g = 0; g * L::group < len; ++g) qsgd_pack_group<Bits>(in + begin, len, begin, g, scale, key, rec + 4);
  }
};

template <unsigned Bits, bool Add>
struct QsgdDecodeKernel {
  using L = QsgdLayout<Bits>;
  const std::byte* in;
  float* out;
  std::size_t n;
  std::size_t bucket;

  GRADSYNC_HD void operator()(std::size_t b) const {
    const auto [begin, len] = bucket_range(b, bucket, n);
    const std::byte* rec = in + b * L::record_bytes(bucket);
    const float step = load<float>(rec) / static_cast<float>(L::levels);
    rec += 4;
    float* o = out + begin;
    std::size_t g = 0;
    for (; (g + 1) * L::group <= len; ++g) unpack(rec + g * L::group_bytes, step, o + g * L::group);
    if (g * L::group < len) {
      float tail[L::group];
      for (std::size_t i = g * L::group; i < len; ++i) tail[i - g * L::group] = Add ? o[i] : 0.0f;
      unpack(rec + g * L::group_bytes, step, tail);
      for (std::size_t i = g * L::group; i < len; ++i) o[i] = tail[i - g * L::group];
    }
  }

  GRADSYNC_HD static void unpack(const std::byte* src, float step, float* dst) {
    std::uint32_t w[L::words];
    memcpy(w, src, sizeof w);
    for (std::uint32_t f = 0; f < L::fields; ++f)
      for (std::uint32_t k = 0; k < L::words; ++k) {
        const float v = value(w[k], f, step);
        float& d = dst[f * L::words + k];
        d = Add ? d + v : v;
      }
  }
  /// Field f of a packed word: its level times step, with its sign.
  GRADSYNC_HD static float value(std::uint32_t word, std::uint32_t f, float step) {
    return qsgd_value<Bits>((word >> (f * Bits)) & ((1u << Bits) - 1), step);
  }
};

/// Element o of a bucket's record `rec` (its scale, then its groups), decoded with `step` =
/// scale / levels: field o % 128 / words of word o % 128 % words of group o / 128. The device
/// decoders' random access to one element; the same values as QsgdDecodeKernel.
template <unsigned Bits>
GRADSYNC_HD float qsgd_element(const std::byte* rec, float step, std::size_t o) {
  using L = QsgdLayout<Bits>;
  const std::size_t g = o / L::group, e = o % L::group;
  const auto word = load<std::uint32_t>(rec + 4 + g * L::group_bytes + 4 * (e % L::words));
  return QsgdDecodeKernel<Bits, false>::value(word, static_cast<std::uint32_t>(e / L::words), step);
}

}  // namespace gradsync::codec::detail
