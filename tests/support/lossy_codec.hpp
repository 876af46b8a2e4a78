#pragma once
// Test support: a small lossy codec that is not summable (bfloat16 by rounding), so collectives
// are exercised on the decode-add-re-encode and forward-verbatim paths that real compressing
// codecs take. Relative error per encode <= 2^-8.
#include <bit>
#include <cstdint>
#include <cstring>

#include <gradsync/codec/concept.hpp>
#include <gradsync/codec/wire.hpp>

namespace testing {

struct RoundBf16 {
  static constexpr std::uint8_t id = 250;
  static constexpr double max_relative_error = 1.0 / 256;
  std::string_view name() const { return "test-bf16"; }
  static constexpr gradsync::codec::Traits traits() { return {}; }  // lossy, no residual, element-wise
  std::size_t encoded_bytes(std::size_t n) const { return gradsync::codec::header_bytes + 2 * n; }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const gradsync::codec::EncodeContext&) const {
    const std::size_t bytes = encoded_bytes(in.size());
    gradsync::codec::write_header(out, {.codec = id, .elements = static_cast<std::uint32_t>(in.size()),
                                        .payload_bytes = static_cast<std::uint32_t>(2 * in.size())});
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::uint32_t b = std::bit_cast<std::uint32_t>(in[i]);
      const std::uint16_t h = static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);  // nearest even
      std::memcpy(out.data() + gradsync::codec::header_bytes + 2 * i, &h, 2);
    }
    return bytes;
  }
  template <class Op>
  void each(std::span<const std::byte> wire, std::size_t n, Op op) const {
    gradsync::codec::read_header(wire, id, n, "test-bf16");
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, wire.data() + gradsync::codec::header_bytes + 2 * i, 2);
      op(i, std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16));
    }
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const {
    each(wire, out.size(), [&](std::size_t i, float v) { out[i] = v; });
  }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {
    each(wire, acc.size(), [&](std::size_t i, float v) { acc[i] += v; });
  }
};
GRADSYNC_CHECK_CODEC(RoundBf16);

}  // namespace testing
