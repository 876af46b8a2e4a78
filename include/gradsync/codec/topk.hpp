#pragma once
/// TopK: sparsification that sends the k = ceil(ratio * n) largest magnitudes of a unit as
/// (index, value) pairs, indices ascending; with a residual the unsent values stay in it and
/// are added to the next iteration's gradient (error feedback), so nothing is lost for good.
/// Ties at the threshold go to the lower index, so every backend picks the same set.
///
/// Payload: k uint32 indices (strictly ascending, < n), then k float values. The header's
/// bucket field carries k.
///
/// \code
///   gradsync::codec::TopK c{.ratio = 0.001f};
///   std::vector<float> residual(n);
///   std::vector<std::byte> wire(c.encoded_bytes(n));
///   c.encode(grad, wire, {.residual = residual});
///   c.decode_add(wire, sum);
/// \endcode
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "concept.hpp"
#include "detail/elementwise.hpp"
#include "detail/frame.hpp"
#include "detail/topk_select.hpp"

namespace gradsync::codec {

struct TopK {
  static constexpr std::uint8_t id = 8;
  float ratio = 0.01f;  ///< fraction of each unit that is sent, in (0, 1]
  std::uint32_t bypass_below = bypass_auto;  ///< tensors under this many elements go as fp32 (codec/bypass.hpp)

  constexpr std::string_view name() const { return "topk"; }
  constexpr Traits traits() const { return {.needs_residual = true, .bypass_below = bypass_below}; }
  GRADSYNC_FRAMED_CODEC_API

  /// Elements sent for a unit of n (at least one of a non-empty unit).
  std::size_t kept(std::size_t n) const {
    if (!(ratio > 0.0f && ratio <= 1.0f))
      throw ConfigError("gradsync: topk ratio " + std::to_string(ratio) + " is not in (0, 1]");
    return std::min(n, std::max<std::size_t>(n > 0, static_cast<std::size_t>(std::ceil(double(ratio) * double(n)))));
  }

  // frame hooks (detail/frame.hpp)
  std::uint32_t wire_bucket(std::size_t n) const { return static_cast<std::uint32_t>(kept(n)); }
  std::size_t payload_bytes(std::size_t n) const { return kept(n) * 8; }
  void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext& ctx) const {
    const std::size_t n = in.size(), k = kept(n);
    if (k == 0) return;
    const float* v = in.data();
    float* residual = ctx.residual.empty() ? nullptr : ctx.residual.data();
    if (residual) {  // select from gradient + residual, kept in the residual itself
      detail::for_each_index(thrust::host, n, detail::AddKernel{in.data(), residual});
      v = residual;
    }
    const detail::TopKThreshold t = detail::topk_threshold(v, n, k);
    const detail::TopKPut put{v, residual, payload, k};
    std::size_t j = 0, ties = t.ties;
    for (std::size_t i = 0; i < n && j < k; ++i) {
      const std::uint32_t a = detail::magnitude_bits(v[i]);
      if (a < t.key || (a == t.key && ties == 0)) continue;
      ties -= a == t.key;
      put(j++, static_cast<std::uint32_t>(i));
    }
  }
  template <bool Add>
  void decode_payload(const std::byte* payload, std::span<float> out) const {
    const std::size_t n = out.size(), k = kept(n);
    // Validate every index before touching `out`, so a bad payload leaves it as it was.
    const detail::TopKIndexBad bad{payload, n};
    for (std::size_t j = 0; j < k; ++j)
      if (bad(j)) throw detail::topk_index_error(detail::load<std::uint32_t>(payload + 4 * j), j, n);
    if constexpr (!Add) std::fill(out.begin(), out.end(), 0.0f);
    detail::for_each_index(thrust::host, k, detail::TopKScatterKernel{payload, out.data(), k});
  }
};
GRADSYNC_CHECK_CODEC(TopK);

}  // namespace gradsync::codec
