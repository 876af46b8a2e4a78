#pragma once
/// detail::Wire: how a collective puts pieces of a unit on the wire with a given codec — one place
/// for the encode / decode-add / decode steps every collective shares, for the error-feedback
/// residual of each encode, for scratch buffers sized to each message, and for the fp32 fast path:
/// with codec::Identity the floats go out as they are (no encode copy, no header) and a receive
/// that only overwrites lands directly in the destination span.
///
/// \code
///   detail::Wire<C> w{t, codec, ws, job};
///   t.send(dst, job.tag, w.encode(piece, stream));   // this rank's data (or a partial sum)
///   w.recv_add(src, piece);                          // piece += what src sent
///   auto out = w.encode_final(piece, stream);        // aggregate: lossy codecs make piece == decoded
///   w.recv_decode(src, piece);                       // piece = what src sent
/// \endcode
///
/// Error feedback: `piece` is a subspan of job.data, and its encode uses the same stretch of the
/// unit's residual (job.ctx.residual, when the codec keeps one). Collectives encode every position
/// of a unit at most once per rank and iteration, so one residual per unit and rank carries the
/// error of whatever that rank encoded there — its own gradient, a partial sum or the aggregate —
/// into the next iteration: nothing a lossy codec drops is lost for good.
///
/// \tparam C  the codec (codec::Codec)
#include <algorithm>
#include <concepts>
#include <cstring>
#include <span>
#include <string>

#include "../codec/identity.hpp"
#include "concept.hpp"

namespace gradsync::collective::detail {

/// True for codecs whose wire form may be the raw floats (fp32 sent as is).
template <class C>
inline constexpr bool raw_fp32 = std::same_as<C, codec::Identity>;

template <codec::Codec C>
struct Wire {
  transport::Transport& t;
  const C& codec;
  Workspace& ws;
  const Job& job;

  /// The bytes that carry `piece` of job.data (this rank's data or a partial sum).
  std::span<const std::byte> encode(std::span<const float> piece, std::uint32_t stream) {
    if constexpr (raw_fp32<C>) return std::as_bytes(piece);
    else return sent_bytes(encode_into_send(piece, stream));
  }
  /// The bytes that carry the aggregate `piece`; for a lossy codec `piece` becomes what every peer
  /// will decode, so all ranks end bit-identical.
  std::span<const std::byte> encode_final(std::span<float> piece, std::uint32_t stream) {
    if constexpr (raw_fp32<C>) {
      return std::as_bytes(piece);
    } else {
      const std::span<const std::byte> out = sent_bytes(encode_into_send(piece, stream));
      if (!codec.traits().lossless) codec.decode(out, piece);
      return out;
    }
  }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {
    if constexpr (raw_fp32<C>) {
      check_raw(wire.size(), acc.size());
      const float* in = reinterpret_cast<const float*>(wire.data());
      for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += in[i];
    } else {
      codec.decode_add(wire, acc);
    }
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const {
    if constexpr (raw_fp32<C>) {
      check_raw(wire.size(), out.size());
      if (wire.data() != reinterpret_cast<const std::byte*>(out.data())) std::memcpy(out.data(), wire.data(), wire.size());
    } else {
      codec.decode(wire, out);
    }
  }
  /// Where a message that only overwrites `out` should be received: `out` itself for raw fp32.
  std::span<std::byte> landing(std::span<float> out) {
    if constexpr (raw_fp32<C>) return std::as_writable_bytes(out);
    else return recv_buffer(out.size());
  }
  /// A receive buffer for the wire form of `elements` (ws.recv, grown once to fit).
  std::span<std::byte> recv_buffer(std::size_t elements) {
    const std::size_t need = codec.encoded_bytes(elements);
    if (ws.recv.size() < need) ws.recv.resize(need);
    return std::span(ws.recv).first(need);
  }

  void recv_add(int src, std::span<float> acc) {
    const std::span<std::byte> in = recv_buffer(acc.size());
    const std::size_t got = t.recv(src, job.tag, in);
    decode_add(in.first(got), acc);
  }
  /// Returns the message as received (in `out` itself for raw fp32), for collectives that forward it.
  std::span<const std::byte> recv_decode(int src, std::span<float> out) {
    const std::span<std::byte> in = landing(out);
    const std::size_t got = t.recv(src, job.tag, in);
    decode(in.first(got), out);
    return in.first(got);
  }

 private:
  /// The first `bytes` of ws.send, taken after the encode that may have grown it.
  std::span<const std::byte> sent_bytes(std::size_t bytes) const { return std::span<const std::byte>(ws.send).first(bytes); }
  std::size_t encode_into_send(std::span<const float> piece, std::uint32_t stream) {
    const std::size_t need = codec.encoded_bytes(piece.size());
    if (ws.send.size() < need) ws.send.resize(need);
    codec::EncodeContext ctx = job.ctx;
    ctx.stream = stream;
    if (ctx.residual.empty() || piece.empty())  // pieces are subspans of job.data
      ctx.residual = {};
    else
      ctx.residual = ctx.residual.subspan(static_cast<std::size_t>(piece.data() - job.data.data()), piece.size());
    return codec.encode(piece, ws.send, ctx);
  }
  void check_raw(std::size_t bytes, std::size_t elements) const {
    if (bytes != elements * sizeof(float))
      throw WireError("gradsync: " + t.describe() + ": fp32 message of " + std::to_string(bytes) + " bytes, expected " +
                      std::to_string(elements * sizeof(float)) + " (ranks disagree on layout, slicing or codec)");
  }
};

}  // namespace gradsync::collective::detail
