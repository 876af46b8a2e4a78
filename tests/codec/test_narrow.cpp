// fp16/bf16: every conversion is round-to-nearest-even (so within half an ulp), checked against
// the definition on a wide sample of floats plus every midpoint between neighbouring 16-bit
// values; decoding is exact for all 65,536 patterns; fp16 also matches the compiler's _Float16.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gradsync/codec/bfloat16.hpp>
#include <gradsync/codec/half.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;
using detail::Bf16Format;
using detail::Fp16Format;

namespace {

/// Returns "" when converting x is correct, otherwise a description of what went wrong.
template <class F>
std::string rne_violation(float x) {
  const std::uint16_t h = F::from_float(x);
  const float y = F::to_float(h);
  if (std::isnan(x)) return std::isnan(y) ? "" : "NaN lost";
  if (std::signbit(x) != std::signbit(y)) return "sign changed";
  const std::uint16_t mag = h & 0x7fffu;
  const double ax = std::fabs(double(x)), ay = std::fabs(double(y));
  // The largest finite value and the first value past it (where an exponent would continue).
  std::uint16_t max_bits = 0x7fffu;
  while (std::isinf(F::to_float(max_bits)) || std::isnan(F::to_float(max_bits))) --max_bits;
  const double max = F::to_float(max_bits), beyond = 2 * max - double(F::to_float(max_bits - 1));
  if (std::isinf(y)) return ax >= (max + beyond) / 2 ? "" : "overflowed below the threshold";
  const double below = mag == 0 ? -double(F::to_float(1)) : F::to_float(mag - 1);
  const double above = mag == max_bits ? beyond : double(F::to_float(mag + 1));
  const double err = std::fabs(ax - ay);
  if (err > ax - below || err > above - ax) return "not the nearest value";
  if ((err == ax - below || err == above - ax) && err > 0 && (mag & 1u)) return "tie not rounded to even";
  return "";
}

template <class F>
void check_rne_everywhere() {
  // A wide sample of all 2^32 bit patterns (every exponent, both signs, NaNs, infinities).
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    const std::string v = rne_violation<F>(x);
    if (!v.empty()) FAIL("bits 0x" << std::hex << b << " (" << x << "): " << v);
  }
  // Every midpoint between neighbouring 16-bit values, and the floats just around it.
  for (std::uint32_t h = 0; h < 0xffffu; ++h) {
    const float lo = F::to_float(static_cast<std::uint16_t>(h)), hi = F::to_float(static_cast<std::uint16_t>(h + 1));
    if (std::isnan(lo) || std::isnan(hi) || std::isinf(lo) || std::isinf(hi) || ((h + 1) & 0x7fffu) == 0) continue;
    const float mid = static_cast<float>((double(lo) + double(hi)) / 2);  // exact: 16-bit formats need < 24 bits
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid), lo}) {
      const std::string v = rne_violation<F>(x);
      if (!v.empty()) FAIL("x = " << x << " between 16-bit 0x" << std::hex << h << " and its successor: " << v);
    }
  }
}

template <class F>
void check_decode_exact() {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const float x = F::to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(x)) continue;
    if (F::from_float(x) != h) FAIL("16-bit 0x" << std::hex << h << " does not survive decode + encode");
  }
}

}  // namespace

TEST_CASE("fp16 rounds to nearest even, handles NaN, infinities, subnormals and overflow", "[codec][fp16]") {
  check_rne_everywhere<Fp16Format>();
  check_decode_exact<Fp16Format>();
  CHECK(Fp16Format::from_float(65504.0f) == 0x7bffu);
  CHECK(Fp16Format::from_float(65519.996f) == 0x7bffu);
  CHECK(Fp16Format::from_float(65520.0f) == 0x7c00u);  // tie between max and 2^16 goes to even = infinity
  CHECK(Fp16Format::from_float(0x1p-24f) == 0x0001u);   // smallest subnormal
  CHECK(Fp16Format::from_float(0x1p-25f) == 0x0000u);   // tie to even (zero)
  CHECK(Fp16Format::from_float(0x1.8p-25f) == 0x0001u);
  CHECK(Fp16Format::from_float(-0.0f) == 0x8000u);
  CHECK(Fp16Format::from_float(std::bit_cast<float>(0x7f800001u)) == 0x7e00u);  // signalling NaN stays NaN
}

#if defined(__FLT16_MANT_DIG__)
TEST_CASE("fp16 agrees bit for bit with the compiler's _Float16 conversion", "[codec][fp16]") {
  for (std::uint64_t b = 0; b < (1ull << 32); b += 65521) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const auto ref = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
    if (Fp16Format::from_float(x) != ref) FAIL("bits 0x" << std::hex << b << ": _Float16 gives 0x" << ref);
  }
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const float ref = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(h)));
    const float got = Fp16Format::to_float(static_cast<std::uint16_t>(h));
    if (!(std::isnan(ref) && std::isnan(got)) && std::bit_cast<std::uint32_t>(ref) != std::bit_cast<std::uint32_t>(got))
      FAIL("decoding 0x" << std::hex << h);
  }
}
#endif

TEST_CASE("the bulk fp16 kernels (F16C instructions where the CPU has them) match the scalar conversion",
          "[codec][fp16]") {
  // Every 4099th bit pattern (all exponents, NaNs, infinities, subnormals, both signs), 4 values
  // short of a multiple of 8 so that the scalar tail runs too.
  std::vector<float> in;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  in.resize(in.size() / 8 * 8 - 4);
  std::vector<std::byte> wire(2 * in.size());
  const std::size_t buckets = detail::bucket_count(in.size(), detail::narrow_chunk);
  const detail::NarrowEncodeKernel<Fp16Format> encode{in.data(), wire.data(), in.size()};
  for (std::size_t b = 0; b < buckets; ++b) encode(b);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto got = detail::load<std::uint16_t>(wire.data() + 2 * i);
    if (got != Fp16Format::from_float(in[i]))
      FAIL("encoding bits 0x" << std::hex << std::bit_cast<std::uint32_t>(in[i]) << " gave 0x" << got);
  }
  // Decoding every 16-bit pattern, plain and added onto 1.0.
  std::vector<std::byte> all(2 * 65536);
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) detail::store(all.data() + 2 * h, static_cast<std::uint16_t>(h));
  std::vector<float> plain(65536), added(65536, 1.0f);
  for (std::size_t b = 0; b < detail::bucket_count(65536, detail::narrow_chunk); ++b) {
    detail::NarrowDecodeKernel<Fp16Format, false>{all.data(), plain.data(), 65536}(b);
    detail::NarrowDecodeKernel<Fp16Format, true>{all.data(), added.data(), 65536}(b);
  }
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const float ref = Fp16Format::to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(ref)) {
      if (!std::isnan(plain[h]) || !std::isnan(added[h])) FAIL("decoding the NaN 0x" << std::hex << h);
      continue;
    }
    if (std::bit_cast<std::uint32_t>(plain[h]) != std::bit_cast<std::uint32_t>(ref) || added[h] != 1.0f + ref)
      FAIL("decoding 0x" << std::hex << h);
  }
}

TEST_CASE("bf16 rounds to nearest even and keeps NaN, infinities and subnormals", "[codec][bf16]") {
  check_rne_everywhere<Bf16Format>();
  check_decode_exact<Bf16Format>();
  CHECK(Bf16Format::from_float(std::bit_cast<float>(0x7f7fffffu)) == 0x7f80u);  // FLT_MAX rounds to infinity
  CHECK(Bf16Format::from_float(std::bit_cast<float>(0x3f808000u)) == 0x3f80u);  // tie, even stays
  CHECK(Bf16Format::from_float(std::bit_cast<float>(0x3f818000u)) == 0x3f82u);  // tie, odd goes up
  CHECK(Bf16Format::from_float(std::bit_cast<float>(0x7f800001u)) == 0x7fc0u);  // NaN whose payload would truncate away
}

TEST_CASE("fp16 and bf16 codecs round-trip a unit within half an ulp", "[codec][fp16][bf16]") {
  const auto v = test_util::gaussian(10'000, 5, 10.0f);
  const Half h;
  const BFloat16 b;
  const auto hv = test_util::decode(h, test_util::encode(h, v), v.size());
  const auto bv = test_util::decode(b, test_util::encode(b, v), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int e = std::ilogb(v[i]);
    CHECK(std::fabs(hv[i] - v[i]) <= std::ldexp(1.0f, std::max(e, -14) - 11));  // half ulp: 2^(e-10) / 2
    CHECK(std::fabs(bv[i] - v[i]) <= std::ldexp(1.0f, e - 8));                  // half ulp: 2^(e-7) / 2
  }
  CHECK(h.encoded_bytes(v.size()) == header_bytes + 2 * v.size());
}
