#pragma once
/// BFloat16: the upper 16 bits of fp32 on the wire, round to nearest even, summable.
/// Same range as fp32 (no overflow worries), 8 significant bits.
///
/// \code
///   gradsync::codec::BFloat16 c;
///   std::vector<std::byte> wire(c.encoded_bytes(grad.size()));
///   c.encode(grad, wire, {});
///   c.decode(wire, out);
/// \endcode
#include "detail/narrow.hpp"

namespace gradsync::codec {

using BFloat16 = detail::Narrow<detail::Bf16Format>;
GRADSYNC_CHECK_CODEC(BFloat16);

}  // namespace gradsync::codec
