#pragma once
/// The low-precision study's rule (sec. 3.2.2): matrices with few elements are not worth
/// quantizing, so they travel in full precision; the threshold keeps > 99% of all parameters
/// quantized. Every lossy codec has a `bypass_below` member (units with fewer elements are
/// sent as plain fp32 under the fp32 codec id); set it to 0 to quantize everything.
///
/// \code
///   gradsync::codec::Qsgd<4> q;                 // q.bypass_below == default_bypass_below
///   gradsync::codec::Qsgd<4> all{.bypass_below = 0};
/// \endcode
#include <cstdint>

namespace gradsync::codec {

/// 16,384 elements. ResNet-50 (161 tensors, 25,557,032 parameters): the tensors under it (all
/// batch-norm scales/shifts, the fc bias, conv1's 9,408 and layer1.0.conv1's 4,096 weights)
/// hold 67,624 parameters, so 99.74% are still compressed; with P3's 40,000-element slices the
/// small slice remainders add up and 99.42% are. (32,768 would give 99.35% per layer but only
/// 96.2% once sliced.)
inline constexpr std::uint32_t default_bypass_below = 16384;

}  // namespace gradsync::codec
