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
#include <algorithm>
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
  std::uint32_t bypass_below = bypass_auto;  ///< tensors under this many elements go as fp32 (codec/bypass.hpp)

  constexpr std::string_view name() const { return "onebit"; }
  constexpr Traits traits() const {
    return {.needs_residual = true, .grain = std::max<std::size_t>(bucket, 1), .bypass_below = bypass_below};
  }
  GRADSYNC_FRAMED_CODEC_API

  // frame hooks (detail/frame.hpp)
  std::uint32_t wire_bucket(std::size_t) const { return detail::checked_bucket(name(), bucket, 32, "one word of sign bits"); }
  std::size_t payload_bytes(std::size_t n) const {
    return detail::bucketed_bytes(n, wire_bucket(n), detail::onebit_record_bytes);
  }
  void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext& ctx) const {
    const std::size_t n = in.size();
    if (ctx.residual.empty())
      detail::for_each_index(thrust::host, detail::bucket_count(n, bucket), detail::OneBitEncodeKernel<false>{in.data(), nullptr, payload, n, bucket});
    else
      detail::for_each_index(thrust::host, detail::bucket_count(n, bucket),
                             detail::OneBitEncodeKernel<true>{in.data(), ctx.residual.data(), payload, n, bucket});
  }
  template <bool Add>
  void decode_payload(const std::byte* payload, std::span<float> out) const {
    detail::for_each_index(thrust::host, detail::bucket_count(out.size(), bucket), detail::OneBitDecodeKernel<Add>{payload, out.data(), out.size(), bucket});
  }
};
GRADSYNC_CHECK_CODEC(OneBit);

}  // namespace gradsync::codec
