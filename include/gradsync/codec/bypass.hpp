#pragma once
/// The low-precision study's rule (sec. 3.2.2): small *matrices* are not worth quantizing, so
/// they travel in full precision, with "a threshold for small matrices in such way so we always
/// quantize more than 99% of all parameters". gradsync decides it per tensor (a layer of the
/// ModelLayout), never per message: every message of a compressed tensor is compressed, however
/// finely a slicing or a collective cuts it. Every lossy codec has a `bypass_below` knob:
/// `bypass_auto` (the default) picks the study's threshold for the model at hand, a number N
/// sends tensors under N elements as fp32, 0 compresses everything.
///
/// \code
///   gradsync::codec::Qsgd<4> q;                   // q.bypass_below == bypass_auto
///   gradsync::codec::Qsgd<4> all{.bypass_below = 0};
///   std::size_t t = gradsync::codec::bypass_threshold(tensor_sizes, q.bypass_below);
///   // tensors with fewer than t elements go as fp32
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace gradsync::codec {

/// `bypass_below` value asking for the study's rule on the model at hand.
inline constexpr std::uint32_t bypass_auto = std::numeric_limits<std::uint32_t>::max();

/// The share of parameters the automatic threshold leaves in fp32 at most ("quantize more than
/// 99% of all parameters").
inline constexpr double bypass_auto_share = 0.01;

/// Tensors with fewer elements than the returned count go as fp32. `bypass_below` is the codec's
/// knob; with bypass_auto: the largest tensor size t such that the tensors smaller than t hold
/// less than bypass_auto_share of all elements. (torchvision's ResNet-50: t = 36,864, so its
/// batch-norm parameters, the fc bias and the convolutions under 36,864 weights go as fp32, 0.78%
/// of the parameters; the trainer's ResNet-20: t = 2,304, its batch-norm parameters, first
/// convolution and fc bias, 0.82%.)
inline std::size_t bypass_threshold(std::span<const std::size_t> tensor_elements, std::uint32_t bypass_below) {
  if (bypass_below != bypass_auto) return bypass_below;
  std::vector<std::size_t> sizes(tensor_elements.begin(), tensor_elements.end());
  std::ranges::sort(sizes);
  double total = 0;
  for (std::size_t s : sizes) total += static_cast<double>(s);
  std::size_t threshold = 0;
  double below = 0;  // elements of the tensors smaller than sizes[i]
  for (std::size_t i = 0; i < sizes.size() && below < bypass_auto_share * total;) {
    threshold = sizes[i];
    for (const std::size_t v = sizes[i]; i < sizes.size() && sizes[i] == v; ++i) below += static_cast<double>(v);
  }
  return threshold;
}

}  // namespace gradsync::codec
