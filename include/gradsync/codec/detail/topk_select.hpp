#pragma once
/// Selection of the k largest magnitudes for TopK, and the payload functors both backends use.
///
/// Which elements are kept is fixed by the wire format, not by the algorithm: the k largest
/// magnitude_bits, ties at the threshold to the lower index (exactly the first k of a stable
/// sort by descending magnitude). The host finds the k-th magnitude with a most-significant-digit
/// radix select (three histogram passes of 11, 11, 10 bits: O(n), no sort, no copy) and scans;
/// the CUDA twin (cuda/codec.cuh) runs CUB's stable radix sort by descending magnitude, keeps
/// the first k indices and sorts them. Both then write the same payload.
#include <cstddef>
#include <cstdint>

#include "kernel.hpp"
#include "reduce.hpp"

namespace gradsync::codec::detail {

/// Keep every element with magnitude bits > key, and the first `ties` (by index) equal to it.
struct TopKThreshold {
  std::uint32_t key;
  std::size_t ties;
};

/// Requires 1 <= k <= n.
inline TopKThreshold topk_threshold(const float* v, std::size_t n, std::size_t k) {
  constexpr unsigned shift[3] = {21, 10, 0};
  constexpr unsigned width[3] = {11, 11, 10};
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::size_t above = 0;  // elements known to be strictly larger than the current prefix range
  for (int pass = 0; pass < 3; ++pass) {
    const std::uint32_t digit_mask = (1u << width[pass]) - 1;
    std::uint32_t hist[1u << 11] = {};
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = magnitude_bits(v[i]);
      if ((a & prefix_mask) == prefix) ++hist[(a >> shift[pass]) & digit_mask];
    }
    std::uint32_t d = digit_mask;
    for (; d > 0 && above + hist[d] < k; --d) above += hist[d];
    prefix |= d << shift[pass];
    prefix_mask |= digit_mask << shift[pass];
  }
  return {prefix, k - above};
}

/// The device selection's sort input: key = magnitude bits, value = index.
struct TopKKeyKernel {
  const float* v;
  std::uint32_t* keys;
  std::uint32_t* indices;
  GRADSYNC_HD void operator()(std::size_t i) const {
    keys[i] = magnitude_bits(v[i]);
    indices[i] = static_cast<std::uint32_t>(i);
  }
};

/// Payload: k uint32 indices, then k float values. Entry j is element `index` of v; with a
/// residual (which then is v itself) that element is sent and so leaves it.
struct TopKPutKernel {
  const float* v;
  float* residual;  // may be null
  const std::uint32_t* indices;
  std::byte* payload;
  std::size_t k;
  GRADSYNC_HD void put(std::size_t j, std::uint32_t index) const {
    store(payload + 4 * j, index);
    store(payload + 4 * (k + j), v[index]);
    if (residual) residual[index] = 0.0f;
  }
  GRADSYNC_HD void operator()(std::size_t j) const { put(j, indices[j]); }
};

/// True when entry j of a payload is invalid: index out of range or not above the previous one.
struct TopKIndexBad {
  const std::byte* payload;
  std::size_t n;
  GRADSYNC_HD bool operator()(std::size_t j) const {
    const std::uint32_t i = load<std::uint32_t>(payload + 4 * j);
    return i >= n || (j > 0 && i <= load<std::uint32_t>(payload + 4 * (j - 1)));
  }
};

/// out[index_j] += value_j (indices validated first: distinct, so no two indices collide).
struct TopKScatterKernel {
  const std::byte* payload;
  float* out;
  std::size_t k;
  GRADSYNC_HD void operator()(std::size_t j) const {
    out[load<std::uint32_t>(payload + 4 * j)] += load<float>(payload + 4 * (k + j));
  }
};

}  // namespace gradsync::codec::detail
