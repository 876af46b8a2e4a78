#pragma once
/// The item kernel of fp32, fp16 and bf16 (narrow_items.hpp): two items of 8 elements per thread.
#include "launch.cuh"
#include "narrow_items.hpp"

namespace gradsync::cuda::detail {

/// Items per thread: all their loads (fp16 decode_add: 2 wire + 4 acc vectors) are issued before
/// the first is used, and before the header check, whose L2 round trip they overlap (a bad
/// header only gates the stores; the loads stay inside the buffers, whose sizes were checked).
inline constexpr unsigned narrow_items_per_thread = 2;

template <class Items>
__global__ void __launch_bounds__(block_threads) narrow_kernel(const Items f, const std::size_t items, const Frame frame) {
  constexpr unsigned per_thread = narrow_items_per_thread;
  const std::size_t first = std::size_t{blockIdx.x} * blockDim.x * per_thread + threadIdx.x;
  typename Items::Loaded r[per_thread];
#pragma unroll
  for (unsigned u = 0; u < per_thread; ++u)
    if (first + u * blockDim.x < items) f.load(first + u * blockDim.x, r[u]);
  if (!admit(frame)) return;
  write_header(frame);
#pragma unroll
  for (unsigned u = 0; u < per_thread; ++u)
    if (first + u * blockDim.x < items) f.finish(first + u * blockDim.x, r[u]);
}

template <class Format, Op op, bool Feedback>
void launch_narrow(const Buffers& b, const Frame& frame, cudaStream_t s) {
  using Items = NarrowItems<Format, op, Feedback>;
  const std::size_t items = Items::items(b.n);
  narrow_kernel<<<blocks_for((items + narrow_items_per_thread - 1) / narrow_items_per_thread), block_threads, 0, s>>>(
      Items{b}, items, frame);
  check(cudaGetLastError(), "fp32/fp16/bf16 kernel launch");
}

}  // namespace gradsync::cuda::detail
