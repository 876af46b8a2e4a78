#pragma once
/// The frame every non-identity codec shares: size checks, the wire header on encode and its
/// validation on decode. A codec supplies the payload only:
///
///   static constexpr std::uint8_t id;  std::string_view name() const;  Traits traits() const;
///   std::uint32_t wire_bucket(std::size_t n) const;    // header's bucket field, checked on decode
///   std::size_t payload_bytes(std::size_t n) const;    // exact payload size for n elements
///   void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext&) const;
///   template <bool Add> void decode_payload(const std::byte* payload, std::span<float> out) const;
///
/// decode_payload is only called after the header and the payload size matched, so it may
/// read payload_bytes(out.size()) bytes; it validates whatever the payload itself encodes.
/// GRADSYNC_FRAMED_CODEC_API, inside the codec's struct, defines the Codec concept's
/// encoded_bytes, encode, decode and decode_add through this frame.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "../bypass.hpp"
#include "../wire.hpp"
#include "elementwise.hpp"

namespace gradsync::codec::detail {

/// A bucket option must be a positive multiple of the packing unit `multiple` (`why` says what
/// that unit is); returns it for the header.
inline std::uint32_t checked_bucket(std::string_view codec, std::uint32_t bucket, std::uint32_t multiple, const char* why) {
  if (bucket == 0 || bucket % multiple != 0)
    throw ConfigError("gradsync: " + std::string(codec) + " bucket " + std::to_string(bucket) +
                      " is not a positive multiple of " + std::to_string(multiple) + " (" + why + ")");
  return bucket;
}

/// Payload bytes of n elements in buckets whose record for len elements takes record(len) bytes.
template <class Record>
std::size_t bucketed_bytes(std::size_t n, std::size_t bucket, Record record) {
  return n / bucket * record(bucket) + (n % bucket ? record(n % bucket) : 0);
}

template <class C>
std::size_t framed_bytes(const C& c, std::size_t n) {
  return header_bytes + c.payload_bytes(n);
}

/// What an encode of n elements into `out_bytes` will do, after the checks every backend makes.
struct EncodePlan {
  std::size_t bytes;  ///< wire size
  WireHeader header;
};

template <class C>
EncodePlan plan_encode(const C& c, std::size_t n, std::size_t out_bytes, std::size_t residual_size) {
  const std::string name(c.name());
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("gradsync: " + name + " encodes at most 2^32-1 elements per unit; slice the layer");
  const std::size_t bytes = framed_bytes(c, n);
  if (out_bytes < bytes)
    throw UsageError("gradsync: " + name + " encode needs an output of encoded_bytes(n) = " +
                     std::to_string(bytes) + " bytes, got " + std::to_string(out_bytes));
  if (c.traits().needs_residual && residual_size != 0 && residual_size != n)
    throw UsageError("gradsync: " + name + " residual has " + std::to_string(residual_size) +
                     " elements, the unit " + std::to_string(n) + "; keep one residual per unit");
  const auto elements = static_cast<std::uint32_t>(n), payload = static_cast<std::uint32_t>(bytes - header_bytes);
  const WireHeader h{.codec = C::id, .elements = elements, .bucket = c.wire_bucket(n), .payload_bytes = payload};
  return {bytes, h};
}

template <class C>
std::size_t encode_framed(const C& c, std::span<const float> in, std::span<std::byte> out,
                          const EncodeContext& ctx) {
  const std::size_t n = in.size();
  const EncodePlan plan = plan_encode(c, n, out.size(), ctx.residual.size());
  write_header(out, plan.header);
  c.encode_payload(in, out.data() + header_bytes, ctx);
  return plan.bytes;
}

/// Checks a framed wire form of `wire_bytes` with header `h` for a unit of n elements; afterwards decode_payload may read payload_bytes(n) bytes.
template <class C>
void check_framed(const C& c, const WireHeader& h, std::size_t wire_bytes, std::size_t n) {
  const std::string name(c.name());
  check_header(h, wire_bytes, C::id, n, name.c_str(), c.wire_bucket(n));
  if (h.payload_bytes != c.payload_bytes(n))
    throw WireError("gradsync: " + name + " payload rejected: " + std::to_string(h.payload_bytes) +
                    " payload bytes, " + std::to_string(n) + " elements need exactly " +
                    std::to_string(c.payload_bytes(n)));
}

template <bool Add, class C>
void decode_framed(const C& c, std::span<const std::byte> wire, std::span<float> out) {
  const std::size_t n = out.size();
  const std::string name(c.name());
  check_framed(c, read_header(wire, C::id, n, name.c_str(), c.wire_bucket(n)), wire.size(), n);
  c.template decode_payload<Add>(wire.data() + header_bytes, out);
}

}  // namespace gradsync::codec::detail

// A macro rather than a CRTP base: a base class would break designated initializers such as
// Qsgd<8>{.bucket = 1024} (-Wmissing-field-initializers) for every user.
#define GRADSYNC_FRAMED_CODEC_API                                                                     \
  std::size_t encoded_bytes(std::size_t n) const { return ::gradsync::codec::detail::framed_bytes(*this, n); } \
  std::size_t encode(std::span<const float> in, std::span<std::byte> out,                              \
                     const ::gradsync::codec::EncodeContext& ctx) const {                              \
    return ::gradsync::codec::detail::encode_framed(*this, in, out, ctx);                              \
  }                                                                                                     \
  void decode(std::span<const std::byte> wire, std::span<float> out) const {                           \
    ::gradsync::codec::detail::decode_framed<false>(*this, wire, out);                                 \
  }                                                                                                     \
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {                       \
    ::gradsync::codec::detail::decode_framed<true>(*this, wire, acc);                                  \
  }

