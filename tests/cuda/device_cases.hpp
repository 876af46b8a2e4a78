#pragma once
// What the device codec tests (test_device_codecs.cu, on a GPU) and their host twins
// (test_host_twins.cpp, everywhere) share: the codecs and inputs they cover, and the host
// codecs' answers they must match bit for bit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <gradsync/codec/any.hpp>
#include <gradsync/core/error.hpp>

#include "codec/test_util.hpp"

namespace device_cases {

/// Every kernel path: fp32/fp16/bf16 items; QSGD cached (bucket <= 1024, both norms) and
/// recomputed (bucket 2048, qsgd16's 8192, the 2-norm of both); 1-bit cached (64, 96: a partial
/// word count) and recomputed (512); top-k; error feedback on the narrow and QSGD kernels.
inline const char* const codecs[] = {
    "fp32",   "fp16",          "bf16",   "qsgd2",     "qsgd4",          "qsgd8",       "qsgd16",
    "qsgd8:norm=l2", "qsgd4:bucket=1024:norm=l2", "qsgd4:bucket=2048", "qsgd16:norm=l2",
    "onebit", "onebit:bucket=96", "onebit:bucket=512", "topk:0.01", "topk:0.3",
    "ef+fp16", "ef+bf16", "ef+qsgd4", "ef+qsgd2:norm=l2", "ef+qsgd8:bucket=2048"};

/// Unit sizes: empty, one partial bucket / item, many buckets with a partial last one.
inline const std::size_t sizes[] = {0, 1000, 100'003};

/// Gaussian values with what the kernels must get right: zeros, a zero bucket, -0.0, magnitude
/// ties (top-k's threshold), a bucket of equal values.
inline std::vector<float> inputs(std::size_t n, unsigned seed) {
  auto v = test_util::gaussian(n, seed);
  for (std::size_t i = 0; i < n; i += 97) v[i] = 0.0f;
  for (std::size_t i = 0; i < 700 && i < n; ++i) v[i] = 0.0f;  // bucket 0 (and 1) all zero
  for (std::size_t i = 5; i < n; i += 1013) v[i] = -0.0f;
  for (std::size_t i = 1000; i < n; i += 151) v[i] = i % 2 ? -2.6f : 2.6f;
  for (std::size_t i = 5120; i < 5632 && i < n; ++i) v[i] = 0.75f;
  return v;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

/// What the host does for the collectives' owner step (collective/partition.hpp): decode_add,
/// finish_mean, encode_final (the residual as Wire::encode gives it).
struct Step {
  std::vector<std::byte> wire;
  std::vector<float> acc, residual;
};
inline Step host_step(const gradsync::codec::AnyCodec& c, std::span<const std::byte> wire_in, std::vector<float> acc,
                      std::vector<float> residual, gradsync::codec::EncodeContext ctx, std::uint32_t mean_of) {
  c.decode_add(wire_in, acc);
  if (mean_of != 1)
    for (float& x : acc) x /= static_cast<float>(mean_of);
  ctx.residual = residual;
  Step s{test_util::encode(c, acc, ctx), {}, {}};
  if (!c.traits().lossless) c.decode(s.wire, acc);
  s.acc = std::move(acc);
  s.residual = std::move(residual);
  return s;
}

/// The residual an encode of c uses in the tests: small values, or none.
inline std::vector<float> residual_for(const gradsync::codec::AnyCodec& c, std::size_t n) {
  return c.traits().needs_residual ? test_util::gaussian(n, 5, 0.1f) : std::vector<float>{};
}

/// The host's wire form of v (encoded with a fresh residual where c keeps one).
inline std::vector<std::byte> wire_of(const gradsync::codec::AnyCodec& c, std::span<const float> v) {
  auto r = residual_for(c, v.size());
  return test_util::encode(c, v, {.residual = r});
}

/// The host decoder's WireError message for `wire` (empty when it decodes).
inline std::string host_error(const gradsync::codec::AnyCodec& c, std::span<const std::byte> wire, std::size_t n) {
  try {
    test_util::decode(c, wire, n);
  } catch (const gradsync::WireError& e) {
    return e.what();
  }
  return {};
}

/// One case (a codec, a unit size) and the host codec's answers for it: encode `v` with the
/// residual `r0`; decode and decode_add `wire` onto `base`; the owner step of `wire` into `base`
/// with the residual `r0`, summing (means[0] = 1) and averaging over 3 ranks (means[1]).
struct Expected {
  static constexpr std::uint32_t means[2] = {1, 3};
  gradsync::codec::EncodeContext ctx{.seed = 7, .iteration = 4, .unit = 3, .stream = 2};
  std::vector<float> v, r0, base;
  std::vector<std::byte> wire;
  std::vector<float> residual, decoded, summed;
  Step steps[2];

  Expected(const gradsync::codec::AnyCodec& c, std::size_t n)
      : v(inputs(n, unsigned(n) + 1)), r0(residual_for(c, n)), base(test_util::gaussian(n, 13)), residual(r0) {
    auto hctx = ctx;
    hctx.residual = residual;
    wire = test_util::encode(c, v, hctx);
    decoded = test_util::decode(c, wire, n);
    summed = base;
    c.decode_add(wire, summed);
    for (int m = 0; m < 2; ++m) steps[m] = host_step(c, wire, base, r0, ctx, means[m]);
  }
};

}  // namespace device_cases
