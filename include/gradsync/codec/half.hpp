#pragma once
/// Half: IEEE fp16 on the wire (2 bytes per element), round to nearest even, summable.
/// Overflow (|x| >= 65520) becomes infinity, as in a hardware conversion.
///
/// \code
///   gradsync::codec::Half c;                       // c.bypass_below = 0: every tensor in fp16
///   std::vector<std::byte> wire(c.encoded_bytes(grad.size()));
///   c.encode(grad, wire, {});
///   c.decode_add(wire, sum);
/// \endcode
#include "detail/narrow.hpp"

namespace gradsync::codec {

using Half = detail::Narrow<detail::Fp16Format>;
GRADSYNC_CHECK_CODEC(Half);

/// `x` as fp16 storage holds it (Half's conversion there and back): for programs that emulate
/// fp16 storage on the host and must see the values a device stores (mixed precision).
GRADSYNC_HD inline float round_to_fp16(float x) {
  return detail::Fp16Format::to_float(detail::Fp16Format::from_float(x));
}

}  // namespace gradsync::codec
