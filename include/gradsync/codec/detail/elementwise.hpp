#pragma once
/// Element-wise functors shared by the host codecs (through thrust::host) and their CUDA twins
/// (thrust::device), one element per kernel index.
#include <cstddef>

#include "kernel.hpp"

namespace gradsync::codec::detail {

/// acc[i] += in[i] (a gradient added into its error-feedback residual).
struct AddKernel {
  const float* in;
  float* acc;
  GRADSYNC_HD void operator()(std::size_t i) const { acc[i] += in[i]; }
};

/// out[i] = a[i] + b[i] (ErrorFeedback: the gradient corrected by its residual).
struct SumKernel {
  const float* a;
  const float* b;
  float* out;
  GRADSYNC_HD void operator()(std::size_t i) const { out[i] = a[i] + b[i]; }
};

/// acc[i] = a[i] - acc[i] (ErrorFeedback: what the decoded value in acc missed of a).
struct ErrorKernel {
  const float* a;
  float* acc;
  GRADSYNC_HD void operator()(std::size_t i) const { acc[i] = a[i] - acc[i]; }
};

/// acc[i] += the i-th fp32 of a wire payload.
struct AddWireKernel {
  const std::byte* payload;
  float* acc;
  GRADSYNC_HD void operator()(std::size_t i) const { acc[i] += load<float>(payload + 4 * i); }
};

}  // namespace gradsync::codec::detail
