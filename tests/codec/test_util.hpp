#pragma once
// Small helpers for the codec tests: deterministic inputs and one-call encode/decode.
#include <cstddef>
#include <random>
#include <span>
#include <vector>

#include <gradsync/codec/concept.hpp>

namespace test_util {

/// n normally distributed values (deterministic for a seed), scaled by `scale`.
inline std::vector<float> gaussian(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

template <class C>
std::vector<std::byte> encode(const C& c, std::span<const float> in, const gradsync::codec::EncodeContext& ctx = {}) {
  std::vector<std::byte> wire(c.encoded_bytes(in.size()));
  const std::size_t used = c.encode(in, wire, ctx);
  wire.resize(used);
  return wire;
}

template <class C>
std::vector<float> decode(const C& c, std::span<const std::byte> wire, std::size_t n) {
  std::vector<float> out(n);
  c.decode(wire, out);
  return out;
}

}  // namespace test_util
