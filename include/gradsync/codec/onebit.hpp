#pragma once
/// OneBit: 1bitSGD with error feedback (low-precision study, sec. 2.2), on reshaped buckets of
/// consecutive values (the study's 1bitSGD*, bucket 64) instead of CNTK's matrix columns.
/// Encode adds the unit's residual, sends per bucket one bit per value plus the mean of the
/// non-negative and the mean of the negative values, and keeps the quantization error as the
/// new residual. Without a residual (a partial sum re-encoded inside a collective) it quantizes
/// without feedback.
///
/// \code
///   gradsync::codec::OneBit c;                          // bucket 64
///   std::vector<float> residual(n);                     // one per unit, zero at the start
///   std::vector<std::byte> wire(c.encoded_bytes(n));
///   c.encode(grad, wire, {.residual = residual});
///   c.decode_add(wire, sum);
/// \endcode
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "concept.hpp"
#include "detail/frame.hpp"
#include "detail/onebit_kernels.hpp"

namespace gradsync::codec {

struct OneBit {
  static constexpr std::uint8_t id = 7;
  std::uint32_t bucket = 64;  ///< elements per (avg+, avg-) pair; a positive multiple of 32
  std::uint32_t bypass_below = default_bypass_below;

  constexpr std::string_view name() const { return "onebit"; }
  constexpr bool lossless() const { return false; }
  constexpr bool summable() const { return false; }
  constexpr bool needs_residual() const { return true; }
  std::size_t encoded_bytes(std::size_t n) const { return detail::framed_bytes(*this, n); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext& ctx) const {
    return detail::encode_framed(*this, in, out, ctx);
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const { detail::decode_framed<false>(*this, wire, out); }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const { detail::decode_framed<true>(*this, wire, acc); }

  // frame hooks (detail/frame.hpp)
  std::uint32_t wire_bucket(std::size_t) const {
    if (bucket == 0 || bucket % 32 != 0)
      throw ConfigError("gradsync: onebit bucket " + std::to_string(bucket) +
                        " is not a positive multiple of 32 (one word of sign bits)");
    return bucket;
  }
  std::size_t payload_bytes(std::size_t n) const {
    const std::size_t full = n / wire_bucket(n), rest = n % bucket;
    return full * detail::onebit_record_bytes(bucket) + (rest ? detail::onebit_record_bytes(rest) : 0);
  }
  void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext& ctx) const {
    const std::size_t n = in.size();
    if (ctx.residual.empty())
      detail::for_each_index(thrust::host, buckets(n), detail::OneBitEncodeKernel<false>{in.data(), nullptr, payload, n, bucket});
    else
      detail::for_each_index(thrust::host, buckets(n),
                             detail::OneBitEncodeKernel<true>{in.data(), ctx.residual.data(), payload, n, bucket});
  }
  template <bool Add>
  void decode_payload(const std::byte* payload, std::span<float> out) const {
    detail::for_each_index(thrust::host, buckets(out.size()), detail::OneBitDecodeKernel<Add>{payload, out.data(), out.size(), bucket});
  }

 private:
  std::size_t buckets(std::size_t n) const { return (n + bucket - 1) / bucket; }
};
GRADSYNC_CHECK_CODEC(OneBit);

}  // namespace gradsync::codec
