#pragma once
/// fp32, fp16 and bf16 on a GPU: items of 8 consecutive elements, so both sides move in 16-byte
/// accesses (8 floats in two, 8 halves in one); a thread loads all of its items before it uses
/// any (narrow.cuh), so several 16-byte loads of each stream are in flight per thread. The
/// conversions are the host codec's own Format functions. The host twin runs load and finish
/// over every item.
#include <cstddef>
#include <cstdint>

#include "../../codec/detail/narrow.hpp"
#include "pass.hpp"

namespace gradsync::cuda::detail {

/// fp32 as a 32-bit format (its bits as they are), so Identity rides the same item kernel.
struct Fp32Format {
  GRADSYNC_HD static std::uint32_t from_float(float f) { return codec::detail::float_bits(f); }
  GRADSYNC_HD static float to_float(std::uint32_t w) { return codec::detail::bits_float(w); }
};

/// \tparam Format   Fp32Format, codec::detail::Fp16Format or Bf16Format
/// \tparam op       what the pass does (pass.hpp)
/// \tparam Feedback encode with the residual (ErrorFeedback<Narrow>)
template <class Format, Op op, bool Feedback>
struct NarrowItems {
  using Word = decltype(Format::from_float(0.0f));
  static constexpr std::size_t per_item = 8;
  static constexpr std::size_t vector_words = 16 / sizeof(Word);  // words per 16-byte access

  Buffers b;  ///< b.vector also means both payloads are 16-byte aligned

  static std::size_t items(std::size_t n) { return (n + per_item - 1) / per_item; }

  /// An item's registers between its loads and its arithmetic: the wire words (decodes), the
  /// source floats (in, or acc) and the residual (feedback); what an op does not use is dropped.
  struct Loaded {
    Word w[per_item] = {};  // zeros past the unit
    float x[per_item] = {}, e[per_item] = {};
  };

  /// Issues every load of an item (the kernel issues several items' before using any).
  GRADSYNC_HD void load(std::size_t item, Loaded& r) const {
    const std::size_t i0 = item * per_item;
    if constexpr (decodes(op)) load_words(b.wire_in + i0 * sizeof(Word), b.vector && i0 + per_item <= b.n, i0, r.w);
    for (std::size_t q = 0; q < per_item; q += 4) {
      if constexpr (encodes(op)) load_pass<op, Feedback, true>(b, i0 + q, r.x + q, r.e + q);
      else if constexpr (op == Op::decode_add) load_quad<true>(b.acc, i0 + q, b.n, b.vector, r.x + q);
    }
  }
  /// The arithmetic and stores of an item loaded by load().
  GRADSYNC_HD void finish(std::size_t item, Loaded& r) const {
    const std::size_t i0 = item * per_item;
    float dec[per_item] = {};
    if constexpr (decodes(op))
      for (std::size_t j = 0; j < per_item; ++j) dec[j] = Format::to_float(r.w[j]);
    for (std::size_t q = 0; q < per_item; q += 4) {
      const std::size_t i = i0 + q;
      if constexpr (!encodes(op)) {
        decode_quad<op, true>(b, i, dec + q, r.x + q);
      } else {
        float* x = r.x + q;
        float d[4];
        combine_pass<op, Feedback>(b, i, dec + q, x, r.e + q);
        for (std::size_t c = 0; c < 4; ++c) {
          r.w[q + c] = Format::from_float(x[c]);
          d[c] = Format::to_float(r.w[q + c]);
        }
        finish_quad<op, Feedback, true>(b, i, x, d);
      }
    }
    if constexpr (encodes(op)) store_words(b.wire_out + i0 * sizeof(Word), b.vector && i0 + per_item <= b.n, i0, r.w);
  }

 private:
  GRADSYNC_HD void load_words(const std::byte* p, bool whole, std::size_t i0, Word* w) const {
    if (whole) {
      for (std::size_t v = 0; v < per_item / vector_words; ++v) {
        std::uint32_t u[4];
        load4<true>(p + 16 * v, u);
        for (std::size_t j = 0; j < vector_words; ++j)
          w[v * vector_words + j] = static_cast<Word>(u[j * sizeof(Word) / 4] >> (8 * (j * sizeof(Word) % 4)));
      }
    } else {
      for (std::size_t j = 0; j < per_item && i0 + j < b.n; ++j) w[j] = codec::detail::load<Word>(p + j * sizeof(Word));
    }
  }
  GRADSYNC_HD void store_words(std::byte* p, bool whole, std::size_t i0, const Word* w) const {
    if (whole) {
      for (std::size_t v = 0; v < per_item / vector_words; ++v) {
        std::uint32_t u[4] = {};
        for (std::size_t j = 0; j < vector_words; ++j)
          u[j * sizeof(Word) / 4] |= static_cast<std::uint32_t>(w[v * vector_words + j]) << (8 * (j * sizeof(Word) % 4));
        store4<true>(p + 16 * v, u);
      }
    } else {
      for (std::size_t j = 0; j < per_item && i0 + j < b.n; ++j) codec::detail::store(p + j * sizeof(Word), w[j]);
    }
  }
};

}  // namespace gradsync::cuda::detail
