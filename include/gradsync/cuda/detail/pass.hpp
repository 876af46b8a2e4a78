#pragma once
/// One pass of a device codec over a unit: what it reads, what it writes, and the per-element
/// arithmetic every codec shares around its own quantizer, written once so each kernel (and its
/// host twin) does exactly what the host codec and the collectives' steps do.
#include <cstddef>

#include "vector.hpp"

namespace gradsync::cuda::detail {

enum class Op {
  encode,      ///< wire_out = encode(in [+ residual]); the residual keeps what the wire missed
  decode,      ///< acc = decode(wire_in)
  decode_add,  ///< acc += decode(wire_in)
  /// The collectives' owner step (decode_add, finish_mean, encode_final): acc = (acc +
  /// decode(wire_in)) / divisor, wire_out = encode(acc [+ residual]), then acc = decode(wire_out).
  reduce,
};

inline constexpr bool decodes(Op op) { return op != Op::encode; }
inline constexpr bool encodes(Op op) { return op == Op::encode || op == Op::reduce; }

/// The buffers of one pass (device pointers; payloads are the bytes after the 16-byte header).
struct Buffers {
  const float* in = nullptr;           ///< encode: the values
  float* acc = nullptr;                ///< decode, decode_add, reduce: the destination
  float* residual = nullptr;           ///< encode, reduce: the error-feedback residual (null: none)
  const std::byte* wire_in = nullptr;  ///< decode, decode_add, reduce: the payload received
  std::byte* wire_out = nullptr;       ///< encode, reduce: the payload written
  std::size_t n = 0;                   ///< elements of the unit
  float divisor = 1.0f;                ///< reduce: the mean's divisor (finish_mean), 1 for a sum
  bool vector = false;                 ///< the float buffers are 16-byte aligned: 16-byte accesses
};

/// What an encoding pass reads for elements i..i+3: the source (in, or acc for a reduce) and,
/// with feedback, the residual (Once: evict-first, data the pass touches once).
template <Op op, bool Feedback, bool Once = false>
GRADSYNC_HD void load_pass(const Buffers& b, std::size_t i, float* x, float* e) {
  load_quad<Once>(op == Op::reduce ? b.acc : b.in, i, b.n, b.vector, x);
  if constexpr (Feedback) load_quad<Once>(b.residual, i, b.n, b.vector, e);
}

/// Elements i..i+3 of what an encoding pass quantizes, from what load_pass read (x, e): the
/// input, or (reduce) acc plus the decoded `dec`, divided by the divisor; with feedback plus the
/// residual. (x + e: fp addition commutes, so this is ErrorFeedback's in + e and OneBit's and
/// TopK's e + in alike.)
template <Op op, bool Feedback>
GRADSYNC_HD void combine_pass(const Buffers& b, std::size_t i, const float* dec, float* x, const float* e) {
  if constexpr (op == Op::reduce)
    for (int c = 0; c < 4; ++c) {
      x[c] = x[c] + dec[c];
      if (b.divisor != 1.0f) x[c] = x[c] / b.divisor;
    }
  if constexpr (Feedback)
    for (int c = 0; c < 4; ++c) x[c] = x[c] + e[c];
  for (std::size_t c = 0; c < 4; ++c)  // past the unit: zeros, the host's padding, whatever dec holds
    if (i + c >= b.n) x[c] = 0.0f;
}

/// load_pass and combine_pass in one.
template <Op op, bool Feedback>
GRADSYNC_HD void pass_quad(const Buffers& b, std::size_t i, const float* dec, float* x) {
  float e[4] = {};  // without feedback nothing loads e (GCC at -O1 flags it as unset)
  load_pass<op, Feedback>(b, i, x, e);
  combine_pass<op, Feedback>(b, i, dec, x, e);
}

/// After quantizing x to wire values d: the residual keeps x - d; a reduce leaves acc = d (what
/// every peer decodes, so all ranks end bit-identical).
template <Op op, bool Feedback, bool Once = false>
GRADSYNC_HD void finish_quad(const Buffers& b, std::size_t i, const float* x, const float* d) {
  if constexpr (Feedback) {
    float e[4];
    for (int c = 0; c < 4; ++c) e[c] = x[c] - d[c];
    store_quad<Once>(b.residual, i, b.n, b.vector, e);
  }
  if constexpr (op == Op::reduce) store_quad<Once>(b.acc, i, b.n, b.vector, d);
}

/// A decoding pass, from acc as loaded (decode_add): acc = dec, or acc += dec.
template <Op op, bool Once = false>
GRADSYNC_HD void decode_quad(const Buffers& b, std::size_t i, const float* dec, const float* acc) {
  float x[4];
  for (int c = 0; c < 4; ++c) x[c] = op == Op::decode_add ? acc[c] + dec[c] : dec[c];
  store_quad<Once>(b.acc, i, b.n, b.vector, x);
}
/// The same, loading acc itself.
template <Op op>
GRADSYNC_HD void decode_quad(const Buffers& b, std::size_t i, const float* dec) {
  float acc[4] = {};
  if constexpr (op == Op::decode_add) load_quad(b.acc, i, b.n, b.vector, acc);
  decode_quad<op>(b, i, dec, acc);
}

}  // namespace gradsync::cuda::detail
