#pragma once
/// Launch plumbing of the device codecs: CUDA error checks, stream-ordered scratch, warp
/// reductions, and the frame every codec kernel runs in (the received header validated by every
/// block on entry, the sent header written by block 0: no host copies either way).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "../../core/error.hpp"
#include "wire_fault.hpp"

namespace gradsync::cuda {

/// A failed CUDA call becomes a std::runtime_error naming it.
inline void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("gradsync: ") + what + " failed: " + cudaGetErrorString(rc));
}

namespace detail {

inline constexpr unsigned block_threads = 256;

/// Blocks of block_threads for `threads` threads; at least one, which writes (or checks) the
/// header of an empty unit.
inline unsigned blocks_for(std::size_t threads) {
  const std::size_t blocks = std::max<std::size_t>(1, (threads + block_threads - 1) / block_threads);
  if (blocks > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw UsageError("gradsync: unit of " + std::to_string(threads) + " work items is too large for one launch; slice the layer");
  return static_cast<unsigned>(blocks);
}

/// Stream-ordered scratch memory (cudaMallocAsync / cudaFreeAsync, from the stream's pool).
template <class T>
class StreamBuffer {
 public:
  StreamBuffer(std::size_t n, cudaStream_t stream) : stream_(stream) {
    check(cudaMallocAsync(reinterpret_cast<void**>(&p_), n * sizeof(T) + (n == 0), stream), "cudaMallocAsync");
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer() { cudaFreeAsync(p_, stream_); }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  cudaStream_t stream_;
};

/// Max / OR over the lanes in `mask` (exact in any order): one redux instruction on sm_80+.
__device__ inline unsigned lanes_max(unsigned mask, unsigned v, unsigned width) {
#if __CUDA_ARCH__ >= 800
  (void)width;
  return __reduce_max_sync(mask, v);
#else
  for (unsigned o = width / 2; o > 0; o /= 2) v = max(v, __shfl_xor_sync(mask, v, o, width));
  return v;
#endif
}
__device__ inline unsigned lanes_or(unsigned mask, unsigned v, unsigned width) {
#if __CUDA_ARCH__ >= 800
  (void)width;
  return __reduce_or_sync(mask, v);
#else
  for (unsigned o = width / 2; o > 0; o /= 2) v |= __shfl_xor_sync(mask, v, o, width);
  return v;
#endif
}

/// Records a fault for `site` unless an earlier one is still unreported (the first wins).
__device__ inline bool claim(const FaultSite& site) { return atomicCAS(&site.fault->call, 0u, site.call) == 0u; }

/// Every thread of a codec kernel: whether the received header is the expected one. If not, the
/// kernel must return before touching anything; block 0 has recorded the fault.
__device__ inline bool admit(const Frame& f) {
  if (!f.in || header_matches(f.in, f.site.expected)) return true;
  if (blockIdx.x == 0 && threadIdx.x == 0 && claim(f.site)) describe_header(*f.site.fault, f.site, f.in);
  return false;
}
/// Block 0 writes the sent header (from the payload's kernel: no host copy is staged).
__device__ inline void write_header(const Frame& f) {
  if (!f.out || blockIdx.x != 0 || threadIdx.x != 0) return;
  std::uint32_t w[4];
  memcpy(w, &f.header, sizeof w);
  for (int i = 0; i < 4; ++i) codec::detail::store(f.out + 4 * i, w[i]);
}

}  // namespace detail
}  // namespace gradsync::cuda
