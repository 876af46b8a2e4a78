#pragma once
/// The wire format shared by every codec: a 16-byte header followed by the payload.
///
///   offset  size  field
///   0       2     magic 0x4753 ("GS"), little endian
///   2       1     format version (1)
///   3       1     codec id (see each codec's `id`)
///   4       4     element count of the unit
///   8       4     bucket size (0 for codecs without buckets)
///   12      4     payload bytes that follow the header
///
/// Decoders call `read_header` with what the receiver expects; any mismatch or truncation
/// throws WireError before a byte of payload is read.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "../core/error.hpp"

namespace gradsync::codec {

struct WireHeader {
  std::uint16_t magic = 0x4753;
  std::uint8_t version = 1;
  std::uint8_t codec = 0;
  std::uint32_t elements = 0;
  std::uint32_t bucket = 0;
  std::uint32_t payload_bytes = 0;
};
static_assert(sizeof(WireHeader) == 16);
inline constexpr std::size_t header_bytes = sizeof(WireHeader);

/// Writes `h` at the start of `out` (which must hold at least header_bytes).
inline void write_header(std::span<std::byte> out, const WireHeader& h) {
  if (out.size() < header_bytes) throw WireError("gradsync: output buffer smaller than the 16-byte wire header");
  std::memcpy(out.data(), &h, header_bytes);
}

/// Validates a header read from a wire form of `wire_bytes` bytes: magic, version, codec id,
/// element count, bucket field (0 for codecs without buckets), and that the payload size it
/// announces is exactly what follows. (Split from read_header for device payloads, whose header
/// is copied to the host alone.)
inline void check_header(const WireHeader& h, std::size_t wire_bytes, std::uint8_t expected_codec,
                         std::size_t expected_elements, const char* codec_name, std::uint32_t expected_bucket = 0) {
  auto fail = [&](const std::string& what) {
    throw WireError(std::string("gradsync: ") + codec_name + " payload rejected: " + what);
  };
  if (h.magic != WireHeader{}.magic) fail("bad magic (not a gradsync payload)");
  if (h.version != WireHeader{}.version) fail("wire format version " + std::to_string(h.version) + ", expected 1");
  if (h.codec != expected_codec)
    fail("codec id " + std::to_string(h.codec) + ", expected " + std::to_string(expected_codec) +
         " (ranks must use the same codec)");
  if (h.elements != expected_elements)
    fail("carries " + std::to_string(h.elements) + " elements, the receiver expects " +
         std::to_string(expected_elements) + " (ranks must use the same model layout and slicing)");
  if (h.bucket != expected_bucket)
    fail("bucket field " + std::to_string(h.bucket) + ", the receiver expects " + std::to_string(expected_bucket) +
         " (ranks must use the same codec options)");
  if (h.payload_bytes != wire_bytes - header_bytes)
    fail("header announces " + std::to_string(h.payload_bytes) + " payload bytes but " +
         std::to_string(wire_bytes - header_bytes) + " arrived (truncated or oversized)");
}

/// Reads the header of `wire` and validates it against what the receiver expects (check_header).
inline WireHeader read_header(std::span<const std::byte> wire, std::uint8_t expected_codec,
                              std::size_t expected_elements, const char* codec_name,
                              std::uint32_t expected_bucket = 0) {
  if (wire.size() < header_bytes)
    throw WireError(std::string("gradsync: ") + codec_name + " payload rejected: truncated (" +
                    std::to_string(wire.size()) + " bytes, the header alone is 16)");
  WireHeader h;
  std::memcpy(&h, wire.data(), header_bytes);
  check_header(h, wire.size(), expected_codec, expected_elements, codec_name, expected_bucket);
  return h;
}

}  // namespace gradsync::codec
