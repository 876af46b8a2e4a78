#pragma once
// Small helpers for the codec tests: deterministic inputs and one-call encode/decode.
#include <algorithm>
#include <cmath>
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

/// Feeds `iterations` fresh gradients through c with one residual (error feedback) and returns
/// the worst |sum(decoded) + final residual - sum(inputs)| over the elements: 0 up to float
/// rounding when nothing is lost.
template <class C>
double conservation_error(const C& c, std::size_t n, std::size_t iterations, unsigned seed) {
  std::vector<float> residual(n, 0.0f);
  std::vector<double> balance(n, 0.0);  // sum(decoded) - sum(inputs)
  for (std::size_t t = 0; t < iterations; ++t) {
    const auto g = gaussian(n, seed + unsigned(t));
    const auto d = decode(c, encode(c, g, {.seed = seed, .iteration = t, .residual = residual}), n);
    for (std::size_t i = 0; i < n; ++i) balance[i] += double(d[i]) - g[i];
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(balance[i] + residual[i]));
  return worst;
}

}  // namespace test_util
