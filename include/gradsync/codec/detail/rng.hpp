#pragma once
/// Counter-based randomness for stochastic rounding: a pure function of
/// (seed, iteration, unit, stream, element index), so an encode gives the same bits on any
/// number of threads and on any backend.
#include <cstdint>

#include "../concept.hpp"
#include "kernel.hpp"

namespace gradsync::codec::detail {

/// SplitMix64 finalizer: a bijective 64-bit mixer with full avalanche.
GRADSYNC_HD inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// One 64-bit key per encode, folded from everything in the context that must change the draw.
inline std::uint64_t stream_key(const EncodeContext& ctx) {
  std::uint64_t k = mix64(ctx.seed);
  k = mix64(k ^ ctx.iteration);
  k = mix64(k ^ ctx.unit);
  return mix64(k ^ ctx.stream);
}

/// 32-bit bijective mixer (xor-shift-multiply rounds); 32-bit multiplies keep it vectorizable.
GRADSYNC_HD inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0x735a2d97u;
  return x ^ (x >> 15);
}

/// A uniform draw in [0, 1) with 24 random bits for element `i` of the stream `key`. One mixer
/// round (a second cost QSGD-8 encode a quarter of its speed); both key halves enter, so two
/// streams only coincide when the whole 64-bit keys do.
GRADSYNC_HD inline float uniform(std::uint64_t key, std::uint32_t i) {
  const std::uint32_t h = mix32((i ^ static_cast<std::uint32_t>(key)) + static_cast<std::uint32_t>(key >> 32));
  return static_cast<float>(static_cast<std::int32_t>(h >> 8)) * 0x1p-24f;  // signed converts branch-free
}

}  // namespace gradsync::codec::detail
