#pragma once
/// fp32, fp16 and bf16 on a GPU: one item of 8 consecutive elements per thread, so both sides
/// move in 16-byte accesses (8 floats in two, 8 halves in one); the conversions are the host
/// codec's own Format functions. The host twin runs the same functor over every item.
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

  GRADSYNC_HD void operator()(std::size_t item) const {
    const std::size_t i0 = item * per_item;
    const bool whole = b.vector && i0 + per_item <= b.n;
    Word w[per_item] = {};
    float dec[per_item] = {};
    if constexpr (decodes(op)) {
      load_words(b.wire_in + i0 * sizeof(Word), whole, i0, w);
      for (std::size_t j = 0; j < per_item; ++j) dec[j] = Format::to_float(w[j]);
    }
    for (std::size_t q = 0; q < per_item; q += 4) {
      const std::size_t i = i0 + q;
      if constexpr (!encodes(op)) {
        decode_quad<op>(b, i, dec + q);
      } else {
        float x[4], d[4];
        pass_quad<op, Feedback>(b, i, dec + q, x);
        for (std::size_t c = 0; c < 4; ++c) {
          w[q + c] = Format::from_float(x[c]);
          d[c] = Format::to_float(w[q + c]);
        }
        finish_quad<op, Feedback>(b, i, x, d);
      }
    }
    if constexpr (encodes(op)) store_words(b.wire_out + i0 * sizeof(Word), whole, i0, w);
  }

 private:
  GRADSYNC_HD void load_words(const std::byte* p, bool whole, std::size_t i0, Word* w) const {
    if (whole) {
      for (std::size_t v = 0; v < per_item / vector_words; ++v) {
        std::uint32_t u[4];
        load4(p + 16 * v, u);
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
        store4(p + 16 * v, u);
      }
    } else {
      for (std::size_t j = 0; j < per_item && i0 + j < b.n; ++j) codec::detail::store(p + j * sizeof(Word), w[j]);
    }
  }
};

}  // namespace gradsync::cuda::detail
