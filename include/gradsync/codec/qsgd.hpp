#pragma once
/// Qsgd<Bits>: QSGD stochastic quantization (low-precision study, sec. 2.3 and 3.2.2).
/// Each bucket of consecutive values is scaled by its max |v| (default: the study found it more
/// accurate) or its 2-norm, and every value is rounded at random to one of s = 2^(Bits-1) - 1
/// uniform levels so that the decoded value is unbiased; one of the Bits is the sign. The draws
/// are a pure function of (seed, iteration, unit, stream, element index). Not summable:
/// collectives decode, add and re-encode.
///
/// \code
///   gradsync::codec::Qsgd<4> q;                                  // bucket 512, max-norm
///   gradsync::codec::Qsgd<8> l2{.bucket = 1024, .norm = gradsync::codec::QsgdNorm::l2};
///   std::vector<std::byte> wire(q.encoded_bytes(n));
///   q.encode(grad, wire, {.seed = 1, .iteration = step, .unit = u});
///   q.decode_add(wire, sum);
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "concept.hpp"
#include "detail/frame.hpp"
#include "detail/qsgd_kernels.hpp"

namespace gradsync::codec {

/// What a QSGD bucket is scaled by.
enum class QsgdNorm : std::uint8_t {
  max,  ///< infinity norm: smaller variance, the study's choice
  l2,   ///< 2-norm, as in the QSGD paper: sparser quantized vectors
};
/// The norm as codec strings spell it ("qsgd8:norm=l2").
constexpr std::string_view norm_text(QsgdNorm n) { return n == QsgdNorm::l2 ? "l2" : "max"; }

/// \tparam Bits bits per element including the sign: 2, 4, 8 or 16
template <unsigned Bits>
  requires(Bits == 2 || Bits == 4 || Bits == 8 || Bits == 16)
struct Qsgd {
  using Layout = detail::QsgdLayout<Bits>;
  static constexpr std::uint8_t id = Bits == 2 ? 3 : Bits == 4 ? 4 : Bits == 8 ? 5 : 6;
  static constexpr std::uint32_t levels = Layout::levels;
  /// The study's bucket sizes: 128 for 2 bits, 512 for 4 and 8, 8192 for 16.
  static constexpr std::uint32_t default_bucket = Bits == 2 ? 128 : Bits == 16 ? 8192 : 512;

  std::uint32_t bucket = default_bucket;  ///< elements per scale; a positive multiple of 128
  QsgdNorm norm = QsgdNorm::max;
  std::uint32_t bypass_below = bypass_auto;  ///< tensors under this many elements go as fp32 (codec/bypass.hpp)

  constexpr std::string_view name() const {
    return Bits == 2 ? "qsgd2" : Bits == 4 ? "qsgd4" : Bits == 8 ? "qsgd8" : "qsgd16";
  }
  constexpr Traits traits() const { return {.grain = std::max<std::size_t>(bucket, 1), .bypass_below = bypass_below}; }
  GRADSYNC_FRAMED_CODEC_API

  // frame hooks (detail/frame.hpp)
  std::uint32_t wire_bucket(std::size_t) const {
    return detail::checked_bucket(name(), bucket, Layout::group, "the packing group");
  }
  std::size_t payload_bytes(std::size_t n) const {
    return detail::bucketed_bytes(n, wire_bucket(n), Layout::record_bytes);
  }
  void encode_payload(std::span<const float> in, std::byte* payload, const EncodeContext& ctx) const {
    detail::for_each_index(thrust::host, detail::bucket_count(in.size(), bucket),
                           detail::QsgdEncodeKernel<Bits>{in.data(), payload, in.size(), bucket,
                                                          norm == QsgdNorm::l2, detail::stream_key(ctx)});
  }
  template <bool Add>
  void decode_payload(const std::byte* payload, std::span<float> out) const {
    detail::for_each_index(thrust::host, detail::bucket_count(out.size(), bucket),
                           detail::QsgdDecodeKernel<Bits, Add>{payload, out.data(), out.size(), bucket});
  }
};

GRADSYNC_CHECK_CODEC(Qsgd<2>);
GRADSYNC_CHECK_CODEC(Qsgd<4>);
GRADSYNC_CHECK_CODEC(Qsgd<8>);
GRADSYNC_CHECK_CODEC(Qsgd<16>);

}  // namespace gradsync::codec
