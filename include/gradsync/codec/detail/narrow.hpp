#pragma once
/// fp32 -> 16-bit float codecs (fp16, bf16): one element in, one 16-bit word out, round to
/// nearest even, NaN stays NaN, overflow goes to infinity, subnormals are exact. Branch-free
/// bit arithmetic so the loops vectorize and the same bodies run on a GPU.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#if defined(__F16C__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#define GRADSYNC_F16C 1
#endif
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "../concept.hpp"
#include "frame.hpp"
#include "kernel.hpp"

namespace gradsync::codec::detail {

/// IEEE 754 binary16.
struct Fp16Format {
  static constexpr std::uint8_t id = 1;
  static constexpr std::string_view name = "fp16";
  // Integer arithmetic only: with the default -ftrapping-math GCC will not execute a float op
  // speculatively, so any float op on one path of a select turns the loop into branches.
  GRADSYNC_HD static std::uint16_t from_float(float f) {
    const std::uint32_t x = float_bits(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t a = x & 0x7fffffffu;
    // Normal range: rebias the exponent (127 -> 15) and round the 13 dropped bits to even; a
    // carry out of the mantissa correctly bumps the exponent, up to infinity at 65520.
    const std::uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    // Below 2^-14 the result is |f| / 2^-24 rounded to even: the mantissa with its hidden bit,
    // shifted right by 126 - exponent, kept in [14, 31] for every input (everything under
    // 2^-25 rounds to zero; for larger exponents this value is not used).
    const std::uint32_t e = (a >> 23) < 112u ? (a >> 23) : 112u;
    const std::uint32_t shift = 126u - e < 31u ? 126u - e : 31u;
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t q = m >> shift, rest = m - (q << shift), half = 1u << (shift - 1);
    const std::uint32_t sub = q + (rest + (q & 1u) > half);  // up when above half, or a tie and q odd
    std::uint32_t h = a < 0x38800000u ? sub : normal;
    h = a >= 0x47800000u ? 0x7c00u : h;                        // overflow, infinity
    h = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : h;  // NaN, kept quiet
    return static_cast<std::uint16_t>(sign | h);
  }
  GRADSYNC_HD static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t a = h & 0x7fffu;
#ifdef __CUDA_ARCH__
    // One conversion instruction, exact for every half but a NaN, whose payload the hardware may
    // not keep as the arithmetic below does (test_device_codecs decodes all 65,536 patterns).
    if (a <= 0x7c00u) return __half2float(__ushort_as_half(h));
#endif
    std::uint32_t x = (a << 13) + 0x38000000u;  // normal: rebias
    x = a >= 0x7c00u ? x + 0x38000000u : x;     // Inf/NaN: exponent 255
    // Subnormal m * 2^-24 = (2^-14 * (1 + m/1024)) - 2^-14, exact, and no operand or result is
    // a float subnormal (so flush-to-zero modes cannot change it). Merged with a mask, not a
    // select, so that the float op stays unconditional and the loop vectorizes (see above).
    const std::uint32_t sub = float_bits(bits_float(0x38800000u | (a << 13)) - 0x1p-14f);
    const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(a < 0x0400u);
    return bits_float(sign | (x & ~is_sub) | (sub & is_sub));
  }
};

/// bfloat16: the top half of an fp32 (same exponent range), mantissa rounded to even.
struct Bf16Format {
  static constexpr std::uint8_t id = 2;
  static constexpr std::string_view name = "bf16";
  GRADSYNC_HD static std::uint16_t from_float(float f) {
    const std::uint32_t x = float_bits(f);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
    return static_cast<std::uint16_t>(nan ? (x >> 16) | 0x40u : rounded);
  }
  GRADSYNC_HD static float to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }
};

/// Elements per kernel index on a CPU: long runs for the vectorizer. A GPU runs one element per
/// index (chunk = 1), so that neighbouring threads touch neighbouring elements (coalesced).
inline constexpr std::size_t narrow_chunk = 4096;

// x86 CPUs with F16C convert 8 values per instruction, with the same results as Fp16Format: round
// to nearest even (the rounding is given, not MXCSR's), overflow to infinity, subnormals exact, a
// NaN kept quiet with its top payload bits. 6-8x the bit arithmetic's rate (bench_codec fp16).
// The scalar loops finish the tails; a GPU and other CPUs run them throughout.
template <class Format>
inline constexpr bool hardware_fp16 =
#ifdef GRADSYNC_F16C
    std::is_same_v<Format, Fp16Format>;
#else
    false;
#endif

template <class Format>
struct NarrowEncodeKernel {
  const float* in;
  std::byte* out;
  std::size_t n;
  std::size_t chunk = narrow_chunk;
  GRADSYNC_HD void operator()(std::size_t index) const {
    auto [begin, len] = bucket_range(index, chunk, n);
    const float* src = in;  // locals: byte stores could alias the members and force reloads
    std::byte* dst = out;
#ifdef GRADSYNC_F16C
    if constexpr (hardware_fp16<Format>)
      for (; len >= 8; begin += 8, len -= 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * begin),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + begin), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (std::size_t i = begin; i < begin + len; ++i) store(dst + 2 * i, Format::from_float(src[i]));
  }
};

template <class Format, bool Add>
struct NarrowDecodeKernel {
  const std::byte* in;
  float* out;
  std::size_t n;
  std::size_t chunk = narrow_chunk;
  GRADSYNC_HD void operator()(std::size_t index) const {
    auto [begin, len] = bucket_range(index, chunk, n);
#ifdef GRADSYNC_F16C
    if constexpr (hardware_fp16<Format>)
      for (; len >= 8; begin += 8, len -= 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * begin)));
        if constexpr (Add) v = _mm256_add_ps(_mm256_loadu_ps(out + begin), v);
        _mm256_storeu_ps(out + begin, v);
      }
#endif
    for (std::size_t i = begin; i < begin + len; ++i) {
      const float v = Format::to_float(load<std::uint16_t>(in + 2 * i));
      out[i] = Add ? out[i] + v : v;
    }
  }
};

/// The codec for one 16-bit format. Summable: fp16/bf16 payloads can be added element-wise.
/// \tparam Format Fp16Format or Bf16Format
template <class Format>
struct Narrow {
  using format = Format;
  static constexpr std::uint8_t id = Format::id;
  /// Tensors with fewer elements go as fp32 (codec/bypass.hpp); 0 = convert everything, as
  /// ImageNet-in-4-minutes does.
  std::uint32_t bypass_below = 0;

  constexpr std::string_view name() const { return Format::name; }
  constexpr Traits traits() const { return {.bypass_below = bypass_below}; }
  GRADSYNC_FRAMED_CODEC_API

  // frame hooks (detail/frame.hpp)
  constexpr std::uint32_t wire_bucket(std::size_t) const { return 0; }
  constexpr std::size_t payload_bytes(std::size_t n) const { return 2 * n; }
  void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext&) const {
    for_each_index(thrust::host, bucket_count(in.size(), narrow_chunk), NarrowEncodeKernel<Format>{in.data(), payload, in.size()});
  }
  template <bool Add>
  void decode_payload(const std::byte* payload, std::span<float> out) const {
    for_each_index(thrust::host, bucket_count(out.size(), narrow_chunk), NarrowDecodeKernel<Format, Add>{payload, out.data(), out.size()});
  }
};

}  // namespace gradsync::codec::detail
