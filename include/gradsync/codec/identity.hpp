#pragma once
/// Identity: fp32 on the wire, bit-exact. The baseline every other codec is measured against.
///
/// \code
///   using Sync = gradsync::Synchronizer<..., gradsync::codec::Identity, ...>;
/// \endcode
#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>

#include "concept.hpp"
#include "detail/elementwise.hpp"
#include "wire.hpp"

namespace gradsync::codec {

struct Identity {
  static constexpr std::uint8_t id = 0;
  constexpr std::string_view name() const { return "fp32"; }
  static constexpr Traits traits() { return {.lossless = true}; }
  constexpr std::size_t encoded_bytes(std::size_t n) const { return header_bytes + n * sizeof(float); }

  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext&) const {
    const std::size_t bytes = encoded_bytes(in.size());
    if (out.size() < bytes) throw UsageError("gradsync: fp32 encode needs an output of encoded_bytes(n) bytes");
    write_header(out, {.codec = id, .elements = static_cast<std::uint32_t>(in.size()),
                       .payload_bytes = static_cast<std::uint32_t>(in.size() * sizeof(float))});
    if (!in.empty()) std::memcpy(out.data() + header_bytes, in.data(), in.size_bytes());  // data() may be null
    return bytes;
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const {
    read_header(wire, id, out.size(), "fp32");
    if (!out.empty()) std::memcpy(out.data(), wire.data() + header_bytes, out.size_bytes());
  }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {
    read_header(wire, id, acc.size(), "fp32");
    detail::for_each_index(thrust::host, acc.size(), detail::AddWireKernel{wire.data() + header_bytes, acc.data()});
  }
};
GRADSYNC_CHECK_CODEC(Identity);

}  // namespace gradsync::codec
