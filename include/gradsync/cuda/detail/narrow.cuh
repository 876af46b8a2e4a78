#pragma once
/// The item kernel of fp32, fp16 and bf16 (narrow_items.hpp): one item of 8 elements per thread.
#include "launch.cuh"
#include "narrow_items.hpp"

namespace gradsync::cuda::detail {

template <class Items>
__global__ void __launch_bounds__(block_threads) narrow_kernel(const Items f, const std::size_t items, const Frame frame) {
  if (!admit(frame)) return;
  write_header(frame);
  const std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < items) f(i);
}

template <class Format, Op op, bool Feedback>
void launch_narrow(const Buffers& b, const Frame& frame, cudaStream_t s) {
  using Items = NarrowItems<Format, op, Feedback>;
  const std::size_t items = Items::items(b.n);
  narrow_kernel<<<blocks_for(items), block_threads, 0, s>>>(Items{b}, items, frame);
  check(cudaGetLastError(), "fp32/fp16/bf16 kernel launch");
}

}  // namespace gradsync::cuda::detail
