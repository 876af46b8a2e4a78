#pragma once
/// Selection of the k largest magnitudes for TopK, and the payload functors both backends use.
///
/// Which elements are kept is fixed by the wire format, not by the algorithm: the k largest
/// magnitude_bits, ties at the threshold to the lower index (exactly the first k of a stable
/// sort by descending magnitude). Both backends find the k-th magnitude with a most-significant-
/// digit radix select (three histogram passes of 11, 11, 10 bits: O(n), no sort, no copy) and
/// scan for the kept elements in index order; the CUDA twin (cuda/detail/topk_tiles.hpp) builds
/// each histogram with atomics and scans its bins on 32 lanes with first_digit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../core/error.hpp"
#include "kernel.hpp"
#include "reduce.hpp"

namespace gradsync::codec::detail {

/// Keep every element with magnitude bits > key, and the first `ties` (by index) equal to it.
struct TopKThreshold {
  std::uint32_t key;
  std::size_t ties;
};

/// The radix select's digits, most significant first: magnitude bits >> shift, width bits wide.
inline constexpr unsigned topk_passes = 3;
GRADSYNC_HD constexpr unsigned topk_shift(unsigned pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
GRADSYNC_HD constexpr unsigned topk_width(unsigned pass) { return pass == 2 ? 10 : 11; }

/// One digit's choice, scanning bins d = hi, hi - 1, ..., lo of a histogram with `above`
/// elements already known to be larger: the first d where the k-th largest falls (above +
/// hist[d] >= k; bin 0 takes whatever is left), with above grown by the bins passed over; -1
/// when it falls below lo (above then has all of [lo, hi]).
GRADSYNC_HD inline long first_digit(const std::uint32_t* hist, unsigned hi, unsigned lo, std::size_t k,
                                    std::size_t& above) {
  for (unsigned d = hi;; --d) {
    if (d == 0 || above + hist[d] >= k) return static_cast<long>(d);
    above += hist[d];
    if (d == lo) return -1;
  }
}

/// Requires 1 <= k <= n.
inline TopKThreshold topk_threshold(const float* v, std::size_t n, std::size_t k) {
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::size_t above = 0;  // elements known to be strictly larger than the current prefix range
  for (unsigned pass = 0; pass < topk_passes; ++pass) {
    const unsigned shift = topk_shift(pass);
    const std::uint32_t digit_mask = (1u << topk_width(pass)) - 1;
    std::uint32_t hist[1u << 11] = {};
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = magnitude_bits(v[i]);
      if ((a & prefix_mask) == prefix) ++hist[(a >> shift) & digit_mask];
    }
    const auto d = static_cast<std::uint32_t>(first_digit(hist, digit_mask, 0, k, above));
    prefix |= d << shift;
    prefix_mask |= digit_mask << shift;
  }
  return {prefix, k - above};
}

/// The WireError of a payload whose entry `position` holds `index`, out of range or not above
/// the previous one, in a unit of n.
inline WireError topk_index_error(std::uint32_t index, std::size_t position, std::size_t n) {
  return WireError("gradsync: topk payload rejected: index " + std::to_string(index) + " at position " +
                   std::to_string(position) + " is out of range or not ascending (unit of " + std::to_string(n) + ")");
}

/// Payload: k uint32 indices, then k float values. Entry j is element `index` of v; with a
/// residual (which then is v itself) that element is sent and so leaves it.
struct TopKPut {
  const float* v;
  float* residual;  // may be null
  std::byte* payload;
  std::size_t k;
  GRADSYNC_HD void operator()(std::size_t j, std::uint32_t index) const {
    store(payload + 4 * j, index);
    store(payload + 4 * (k + j), v[index]);
    if (residual) residual[index] = 0.0f;
  }
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
