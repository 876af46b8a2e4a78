#pragma once
/// QSGD on a GPU: one warp per bucket, in one pass. Lane t holds elements 128g + 4t .. 128g + 4t + 3
/// of each group g of its bucket (16-byte loads, coalesced across the warp), up to 8 groups (a
/// bucket of 1024) in registers. The scale: a warp max of the lanes' magnitude bits (an integer
/// max: exact in any order), or for the 2-norm the host's 16 fmaf lanes run by lanes 0-15 over the
/// bucket staged in shared memory (fold_lanes as on the host). Then group by group every lane
/// quantizes its quad into the group's 128 fields in shared memory (updating the residual, or acc
/// for a reduce, from the same registers), and the lanes assemble the packed words from them.
/// Buckets over 1024 are read twice instead (the values are recomputed, not kept).
///
/// These are the steps; cuda/detail/qsgd.cuh runs them with the warp's reductions in between,
/// and tests/cuda/test_host_twins.cpp runs them on the host against the host codec's bytes.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../codec/detail/qsgd_kernels.hpp"
#include "pass.hpp"

namespace gradsync::cuda::detail {

/// \tparam Bits     bits per element (codec::Qsgd<Bits>)
/// \tparam op       what the pass does (pass.hpp)
/// \tparam Feedback encode with the residual (ErrorFeedback<Qsgd<Bits>>)
template <unsigned Bits, Op op, bool Feedback>
struct QsgdWarp {
  using L = codec::detail::QsgdLayout<Bits>;
  using Field = std::conditional_t<(Bits <= 8), std::uint8_t, std::uint16_t>;
  static constexpr unsigned lanes = 32;
  static constexpr std::size_t cached_groups = 8;

  Buffers b;
  std::size_t bucket;
  bool l2;
  std::uint64_t key;

  GRADSYNC_HD bool cached() const { return bucket <= cached_groups * L::group; }
  /// Shared memory per warp: the fields of one group, 16 partial sums, and for the 2-norm of a
  /// cached bucket the bucket itself.
  GRADSYNC_HD std::size_t smem_bytes() const {
    return (L::group * sizeof(Field) + 64 + 15) / 16 * 16 + (l2 && cached() ? bucket * sizeof(float) : 0);
  }

  GRADSYNC_HD const std::byte* record_in(std::size_t bk) const { return b.wire_in + bk * L::record_bytes(bucket); }
  GRADSYNC_HD std::byte* record_out(std::size_t bk) const { return b.wire_out + bk * L::record_bytes(bucket); }
  /// The decode step of wire_in's bucket bk: its scale / levels, as the host decoder computes it.
  GRADSYNC_HD float step_in(std::size_t bk) const {
    return codec::detail::load<float>(record_in(bk)) / static_cast<float>(L::levels);
  }

  /// Pass 1, lane `lane`, group g of the bucket bk starting at `begin`: x, the quad's values to
  /// encode (zeros past the unit: the host's padding). `step`: step_in(bk) for a reduce.
  GRADSYNC_HD void gather(std::size_t bk, std::size_t begin, std::size_t g, unsigned lane, float step, float* x) const {
    float e[4] = {};  // without feedback nothing loads e (GCC at -O1 flags it as unset)
    load(begin, g, lane, x, e);
    combine(bk, begin, g, lane, step, x, e);
  }
  /// gather in two steps, so that a lane issues the loads of all its groups before it uses any.
  GRADSYNC_HD void load(std::size_t begin, std::size_t g, unsigned lane, float* x, float* e) const {
    load_pass<op, Feedback>(b, begin + g * L::group + 4 * lane, x, e);
  }
  GRADSYNC_HD void combine(std::size_t bk, std::size_t begin, std::size_t g, unsigned lane, float step, float* x,
                           const float* e) const {
    const std::size_t o = g * L::group + 4 * lane;
    float dec[4] = {};
    if constexpr (op == Op::reduce)
      for (std::size_t c = 0; c < 4; ++c) dec[c] = codec::detail::qsgd_element<Bits>(record_in(bk), step, o + c);
    combine_pass<op, Feedback>(b, begin + o, dec, x, e);
  }
  GRADSYNC_HD static std::uint32_t max_bits(const float* x) {
    std::uint32_t m = 0;
    for (int c = 0; c < 4; ++c) m = m > codec::detail::magnitude_bits(x[c]) ? m : codec::detail::magnitude_bits(x[c]);
    return m;
  }

  /// Element o of the bucket as gather computes it: the 2-norm lanes' view of a bucket too large
  /// to keep (x[o], for lane_sum_squares).
  struct At {
    const QsgdWarp& w;
    std::size_t bk, begin;
    float step;
    GRADSYNC_HD float operator[](std::size_t o) const {
      float x[4];
      w.gather(bk, begin, o / L::group, static_cast<unsigned>(o % L::group / 4), step, x);
      return x[o % 4];
    }
  };

  /// Pass 2, lane `lane`, group g: the quad's fields into the group's fields F, and the residual
  /// (x minus what the wire carries) or acc (a reduce: what the wire carries).
  GRADSYNC_HD void quantize(std::size_t begin, std::size_t g, unsigned lane, const float* x, float scale, Field* F) const {
    const float mult = codec::detail::qsgd_mult<Bits>(scale), step = scale / static_cast<float>(L::levels);
    const std::size_t i = begin + g * L::group + 4 * lane;
    float d[4];
    for (std::size_t c = 0; c < 4; ++c) {
      const std::uint32_t f = codec::detail::qsgd_field<Bits>(x[c], mult, key, static_cast<std::uint32_t>(i + c));
      F[4 * lane + c] = static_cast<Field>(f);
      d[c] = codec::detail::qsgd_value<Bits>(f, step);
    }
    finish_quad<op, Feedback>(b, i, x, d);
  }
  /// Lane `lane`'s packed words of group g (words lane, lane + 32, ...) from the group's fields.
  GRADSYNC_HD void store_words(std::size_t bk, std::size_t g, unsigned lane, const Field* F) const {
    for (std::size_t k = lane; k < L::words; k += lanes) {
      std::uint32_t w = 0;
      for (std::uint32_t f = 0; f < L::fields; ++f) w |= static_cast<std::uint32_t>(F[f * L::words + k]) << (f * Bits);
      codec::detail::store(record_out(bk) + 4 + g * L::group_bytes + 4 * k, w);
    }
  }
  GRADSYNC_HD void store_scale(std::size_t bk, float scale) const { codec::detail::store(record_out(bk), scale); }

  /// A decoding pass (decode, decode_add), lane `lane`, group g: acc [+]= the quad's values.
  GRADSYNC_HD void decode(std::size_t bk, std::size_t begin, std::size_t g, unsigned lane, float step) const {
    const std::size_t o = g * L::group + 4 * lane;
    if (begin + o >= b.n) return;
    float dec[4];
    for (std::size_t c = 0; c < 4; ++c) dec[c] = codec::detail::qsgd_element<Bits>(record_in(bk), step, o + c);
    decode_quad<op>(b, begin + o, dec);
  }
};

}  // namespace gradsync::cuda::detail
