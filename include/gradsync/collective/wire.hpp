#pragma once
/// detail::Wire: how a collective puts float ranges on the wire with a given codec — one place for
/// the encode / decode-add / decode steps every collective shares, and for the fp32 fast path:
/// with codec::Identity the floats go out as they are (no encode copy, no header) and a receive
/// that only overwrites lands directly in the destination span.
///
/// \code
///   detail::Wire<C> w{t, codec, ws, job.tag};
///   t.send(dst, job.tag, w.encode(range, ctx));   // reduce step: this rank's partial data
///   w.recv_add(src, range);                       // range += what src sent
///   auto out = w.encode_final(range, ctx);        // aggregate: lossy codecs make range == decoded
///   w.recv_decode(src, range);                    // range = what src sent
/// \endcode
///
/// \tparam C  the codec (codec::Codec)
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
  transport::Tag tag;

  /// The bytes that carry `data` (partial data of a reduce step).
  std::span<const std::byte> encode(std::span<const float> data, const codec::EncodeContext& ctx) {
    if constexpr (raw_fp32<C>) return std::as_bytes(data);
    else return std::span<const std::byte>(ws.send).first(codec.encode(data, ws.send, ctx));
  }
  /// The bytes that carry the aggregate `data`; for a lossy codec `data` becomes what every peer
  /// will decode, so all ranks end bit-identical.
  std::span<const std::byte> encode_final(std::span<float> data, const codec::EncodeContext& ctx) {
    if constexpr (raw_fp32<C>) return std::as_bytes(data);
    else return std::span<const std::byte>(ws.send).first(collective::detail::encode_final(codec, data, ctx, ws));
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
    else return ws.recv;
  }

  void recv_add(int src, std::span<float> acc) {
    const std::size_t got = t.recv(src, tag, ws.recv);
    decode_add(std::span<const std::byte>(ws.recv).first(got), acc);
  }
  /// Returns the message as received (in `out` itself for raw fp32), for collectives that forward it.
  std::span<const std::byte> recv_decode(int src, std::span<float> out) {
    const std::span<std::byte> in = landing(out);
    const std::size_t got = t.recv(src, tag, in);
    decode(in.first(got), out);
    return in.first(got);
  }

 private:
  void check_raw(std::size_t bytes, std::size_t elements) const {
    if (bytes != elements * sizeof(float))
      throw WireError("gradsync: " + t.describe() + ": fp32 message of " + std::to_string(bytes) + " bytes, expected " +
                      std::to_string(elements * sizeof(float)) + " (ranks disagree on layout, slicing or codec)");
  }
};

}  // namespace gradsync::collective::detail
