#pragma once
/// Top-k on a GPU: the host's radix select (codec/detail/topk_select.hpp), exact, in passes:
///   0. prepare: v = in [+ residual] (a reduce: acc / divisor [+ residual]), written where the
///      later passes read it; with the histogram of digit 0 of v's magnitude bits.
///   1-2. histograms of digits 1 and 2 over the elements that match the chosen prefix.
///      After each histogram one warp chooses the digit: lane L scans 1/32 of the bins with the
///      host's first_digit, starting from the count above its bins; the highest lane that finds
///      the k-th largest wins. After pass 2, key = the k-th largest magnitude bits, ties = how
///      many elements equal to it are kept (the lowest indices).
///   3. counts per tile of 4096 elements (256 threads x 16 consecutive elements): how many are
///      above the key and how many equal it, packed in one 64-bit sum; an exclusive scan of them.
///   4. placement: a block scan within the tile gives each thread the counts before its elements,
///      so every kept element's payload slot (ascending index order) is known: the host's bytes.
/// The selected set is exactly the host's: the k largest magnitudes, ties to the lower index.
///
/// These are the steps; cuda/detail/topk.cuh launches them, and tests/cuda/test_host_twins.cpp
/// runs them on the host against the host codec's bytes.
#include <cstddef>
#include <cstdint>

#include "../../codec/detail/topk_select.hpp"
#include "pass.hpp"

namespace gradsync::cuda::detail {

inline constexpr unsigned topk_threads = 256;         // per block (a tile)
inline constexpr unsigned topk_per_thread = 16;       // consecutive elements per thread
inline constexpr std::size_t topk_tile = std::size_t{topk_threads} * topk_per_thread;
inline constexpr unsigned topk_bins = 1u << 11;       // the widest digit

/// The radix select between passes (device memory).
struct TopKSelect {
  std::uint32_t prefix = 0, mask = 0;  ///< digits chosen so far, and which bits they cover
  unsigned long long above = 0;        ///< elements known to be larger than the prefix range

  /// Bin of magnitude bits a in pass p, or -1 when a does not match the prefix.
  GRADSYNC_HD long bin(std::uint32_t a, unsigned p) const {
    if ((a & mask) != prefix) return -1;
    return static_cast<long>((a >> codec::detail::topk_shift(p)) & ((1u << codec::detail::topk_width(p)) - 1));
  }
  /// Bins [lo, hi] that lane `lane` of the choosing warp scans in pass p (lane 0 the highest).
  GRADSYNC_HD static void lane_bins(unsigned p, unsigned lane, unsigned& hi, unsigned& lo) {
    const unsigned bins = 1u << codec::detail::topk_width(p), per = bins / 32;
    hi = bins - 1 - lane * per;
    lo = hi + 1 - per;
  }
  /// Records digit d of pass p and the count above the new prefix range.
  GRADSYNC_HD void choose(unsigned p, unsigned d, unsigned long long new_above) {
    prefix |= d << codec::detail::topk_shift(p);
    mask |= ((1u << codec::detail::topk_width(p)) - 1) << codec::detail::topk_shift(p);
    above = new_above;
  }
};

/// Pass 0's values: v = src / divisor [+ residual], written to the residual, or to `keep` (acc,
/// when a reduce divides and has no residual), so the later passes read v from `v_at()`.
struct TopKPrepare {
  const float* src;       ///< in, or (reduce) acc with the decoded wire already added
  float* residual;        ///< null: none
  float* keep;            ///< null unless a reduce divides without a residual (then acc)
  float divisor;
  std::size_t n;
  bool vector;

  const float* v_at() const { return residual ? residual : keep ? keep : src; }
  GRADSYNC_HD void operator()(std::size_t i, float* x) const {
    load_quad(src, i, n, vector, x);
    if (divisor != 1.0f)
      for (int c = 0; c < 4; ++c) x[c] = x[c] / divisor;
    if (residual) {
      float e[4];
      load_quad(residual, i, n, vector, e);
      for (int c = 0; c < 4; ++c) x[c] = e[c] + x[c];
      store_quad(residual, i, n, vector, x);
    } else if (keep) {
      store_quad(keep, i, n, vector, x);
    }
  }
};

/// Passes 3 and 4 over tiles.
struct TopKTiles {
  const float* v;
  float* residual;  ///< kept elements leave it (null: none)
  float* acc;       ///< a reduce: acc = decode(wire_out), v where kept, else 0 (null: encode)
  std::byte* payload;
  std::size_t n, k;
  bool vector;

  static std::size_t tiles(std::size_t n) { return (n + topk_tile - 1) / topk_tile; }
  GRADSYNC_HD std::size_t first(std::size_t tile, unsigned t) const { return tile * topk_tile + std::size_t{t} * topk_per_thread; }

  /// f(i, x) for each quad of thread t's elements: i its first element, x its values.
  template <class F>
  GRADSYNC_HD void each_quad(std::size_t tile, unsigned t, F&& f) const {
    for (std::size_t i = first(tile, t); i < first(tile, t) + topk_per_thread && i < n; i += 4) {
      float x[4];
      load_quad(v, i, n, vector, x);
      f(i, x);
    }
  }
  /// (above << 32) | equal: thread t's elements above the key and equal to it.
  GRADSYNC_HD unsigned long long count(std::size_t tile, unsigned t, std::uint32_t key) const {
    unsigned long long above = 0, equal = 0;
    each_quad(tile, t, [&](std::size_t i, const float* x) {
      for (std::size_t c = 0; c < 4 && i + c < n; ++c) {
        above += codec::detail::magnitude_bits(x[c]) > key;
        equal += codec::detail::magnitude_bits(x[c]) == key;
      }
    });
    return above << 32 | equal;
  }
  /// Writes thread t's kept elements: `before` is count()'s sum over all earlier elements, so an
  /// element's slot is the kept count before it (the first `ties` equal ones are kept).
  GRADSYNC_HD void place(std::size_t tile, unsigned t, std::uint32_t key, std::size_t ties,
                         unsigned long long before) const {
    std::size_t above = before >> 32, equal = before & 0xffffffffu;
    const codec::detail::TopKPut put{v, residual, payload, k};
    each_quad(tile, t, [&](std::size_t i, float* x) {
      for (std::size_t c = 0; c < 4 && i + c < n; ++c) {
        const std::uint32_t a = codec::detail::magnitude_bits(x[c]);
        const bool kept = a > key || (a == key && equal < ties);
        if (kept) put(above + (equal < ties ? equal : ties), static_cast<std::uint32_t>(i + c));
        above += a > key;
        equal += a == key;
        if (!kept) x[c] = 0.0f;
      }
      if (acc) store_quad(acc, i, n, vector, x);
    });
  }
};

/// The top-k passes of one call: an encode selects from in [+ residual]; a reduce (its decoded
/// wire already scattered into acc) from acc / divisor [+ residual], and leaves acc decoded.
inline TopKPrepare topk_prepare(Op op, const Buffers& b) {
  if (op == Op::encode) return {b.in, b.residual, nullptr, 1.0f, b.n, b.vector};
  return {b.acc, b.residual, !b.residual && b.divisor != 1.0f ? b.acc : nullptr, b.divisor, b.n, b.vector};
}
inline TopKTiles topk_tiles(Op op, const Buffers& b, const TopKPrepare& p, std::size_t k) {
  return {p.v_at(), b.residual, op == Op::reduce ? b.acc : nullptr, b.wire_out, b.n, k, b.vector};
}

}  // namespace gradsync::cuda::detail
