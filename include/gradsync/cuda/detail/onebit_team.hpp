#pragma once
/// 1-bit on a GPU: a team of 8 threads per bucket (4 buckets per warp), in one pass. Team lane t
/// holds elements 32w + 4t .. 32w + 4t + 3 of each 32-value word w of its bucket (16-byte loads),
/// up to 8 words (a bucket of 256) in registers, and runs the host's SignSums lanes 4t .. 4t + 3
/// over the words in order; the team folds them as SignSums::fold does, pair for pair: three
/// register exchanges (shuffles) across the team, then two levels inside each lane. The words of sign bits are an OR across the team (exact
/// in any order); the residual (or acc, for a reduce) is updated from the same registers. Buckets
/// over 256 are read twice instead (the values are recomputed, not kept).
///
/// These are the steps; cuda/detail/onebit.cuh runs them with the team's exchanges in between,
/// and tests/cuda/test_host_twins.cpp runs them on the host against the host codec's bytes.
#include <cstddef>
#include <cstdint>

#include "../../codec/detail/onebit_kernels.hpp"
#include "pass.hpp"

namespace gradsync::cuda::detail {

/// \tparam op       what the pass does (pass.hpp)
/// \tparam Feedback encode with the residual (OneBit's own error feedback)
template <Op op, bool Feedback>
struct OneBitTeam {
  using SignSums = codec::detail::SignSums;
  using SignMeans = codec::detail::SignMeans;
  static constexpr unsigned lanes = 8;
  static constexpr std::size_t cached_words = 8;

  Buffers b;
  std::size_t bucket;

  GRADSYNC_HD bool cached() const { return bucket <= cached_words * 32; }
  GRADSYNC_HD const std::byte* record_in(std::size_t bk) const { return b.wire_in + bk * codec::detail::onebit_record_bytes(bucket); }
  GRADSYNC_HD std::byte* record_out(std::size_t bk) const { return b.wire_out + bk * codec::detail::onebit_record_bytes(bucket); }

  /// Bit j of word w of a record: its value, minus (set) or plus.
  GRADSYNC_HD static void decoded(const std::byte* rec, std::size_t w, unsigned lane, float* dec) {
    const float plus = codec::detail::load<float>(rec), minus = codec::detail::load<float>(rec + 4);
    const auto bits = codec::detail::load<std::uint32_t>(rec + 8 + 4 * w);
    for (unsigned c = 0; c < 4; ++c) dec[c] = (bits >> (4 * lane + c)) & 1u ? minus : plus;
  }

  /// Lane `lane`'s quad of word w of bucket bk (from `begin`): the values to encode (zeros past
  /// the unit: the host's padding of the last word).
  GRADSYNC_HD void gather(std::size_t bk, std::size_t begin, std::size_t w, unsigned lane, float* x) const {
    float e[4] = {};  // without feedback nothing loads e (GCC at -O1 flags it as unset)
    load(begin, w, lane, x, e);
    combine(bk, begin, w, lane, x, e);
  }
  /// gather in two steps, so that a lane issues the loads of all its words before it uses any.
  GRADSYNC_HD void load(std::size_t begin, std::size_t w, unsigned lane, float* x, float* e) const {
    load_pass<op, Feedback>(b, begin + 32 * w + 4 * lane, x, e);
  }
  GRADSYNC_HD void combine(std::size_t bk, std::size_t begin, std::size_t w, unsigned lane, float* x, const float* e) const {
    float dec[4] = {};
    if constexpr (op == Op::reduce) decoded(record_in(bk), w, lane, dec);
    combine_pass<op, Feedback>(b, begin + 32 * w + 4 * lane, dec, x, e);
  }

  /// A lane's four SignSums lanes (4 * lane + c), over the words in order.
  struct Partial {
    std::uint32_t count[4];
    float plus[4], total[4];
    GRADSYNC_HD void take(std::size_t w, const float* x) {
      for (int c = 0; c < 4; ++c) {
        if (w == 0) SignSums::first(count[c], plus[c], total[c], x[c]);
        else SignSums::next(count[c], plus[c], total[c], x[c]);
      }
    }
    /// The fold's exchange: lane t adds lane t ^ h's partial, h = 4, 2, 1 (team lanes t < h do
    /// SignSums::fold's levels 16, 8, 4: SignSums lane 4t + c += lane 4t + c + 4h; the others
    /// add the same pairs the other way round, which gives the same bits).
    GRADSYNC_HD void absorb(const Partial& o) {
      for (int c = 0; c < 4; ++c) {
        count[c] += o.count[c];
        plus[c] += o.plus[c];
        total[c] += o.total[c];
      }
    }
    /// After the exchanges: fold's levels 2 and 1 inside the lane, and the bucket's means.
    GRADSYNC_HD SignMeans means(std::size_t len, std::size_t words) const {
      return codec::detail::sign_means((count[0] + count[2]) + (count[1] + count[3]), (plus[0] + plus[2]) + (plus[1] + plus[3]),
                                       (total[0] + total[2]) + (total[1] + total[3]), len, words);
    }
  };

  /// Lane `lane`'s bits of a word: bit 4 * lane + c set <=> x[c] < 0 (as codec::detail::negative_bits).
  GRADSYNC_HD static std::uint32_t sign_bits(const float* x, unsigned lane) {
    std::uint32_t bits = 0;
    for (unsigned c = 0; c < 4; ++c) bits |= static_cast<std::uint32_t>(x[c] < 0.0f) << (4 * lane + c);
    return bits;
  }
  /// Record entry j of bucket bk: 0 plus, 1 minus, 2 + w the sign bits of word w.
  GRADSYNC_HD void store_entry(std::size_t bk, std::size_t j, std::uint32_t value) const {
    codec::detail::store(record_out(bk) + 4 * j, value);
  }
  /// After the record: the residual keeps x minus its wire value; a reduce leaves acc = that value.
  GRADSYNC_HD void finish(std::size_t begin, std::size_t w, unsigned lane, const float* x, SignMeans m) const {
    float d[4];
    for (int c = 0; c < 4; ++c) d[c] = x[c] < 0.0f ? m.minus : m.plus;
    finish_quad<op, Feedback>(b, begin + 32 * w + 4 * lane, x, d);
  }

  /// A decoding pass (decode, decode_add), lane `lane`, word w: acc [+]= the quad's values.
  GRADSYNC_HD void decode(std::size_t bk, std::size_t begin, std::size_t w, unsigned lane) const {
    const std::size_t i = begin + 32 * w + 4 * lane;
    if (i >= b.n) return;
    float dec[4];
    decoded(record_in(bk), w, lane, dec);
    decode_quad<op>(b, i, dec);
  }
};

}  // namespace gradsync::cuda::detail
