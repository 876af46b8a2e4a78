#pragma once
/// The top-k kernels (topk_tiles.hpp) and their sequence: radix select in three histogram passes,
/// counts per tile, a scan, placement; and the decoders: index validation, then the scatter.
/// Kernels without parameters of their own are `template <class = void>`: a header included by
/// several .cu files must not define a kernel twice.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "../../codec/detail/topk_select.hpp"
#include "launch.cuh"
#include "topk_tiles.hpp"

namespace gradsync::cuda::detail {

/// The validation's verdict (device memory): ~0 while every index is good, else the lowest bad
/// position, or header_fault for a bad header. Every later kernel of the call returns when it is
/// set, so a bad payload touches nothing.
inline constexpr unsigned long long topk_good = ~0ull, topk_header_fault = 1ull << 32;

__device__ inline bool topk_abort(const unsigned long long* verdict) { return verdict && *verdict != topk_good; }

/// Histogram of digit `pass` of the magnitude bits of v (pass 0: of what TopKPrepare makes).
template <bool Prepare>
__global__ void __launch_bounds__(block_threads) topk_hist_kernel(const TopKPrepare p, const float* v, const TopKSelect* sel,
                                                                   const unsigned pass, std::uint32_t* hist,
                                                                   const unsigned long long* verdict) {
  __shared__ std::uint32_t bins[topk_bins];
  if (topk_abort(verdict)) return;
  for (unsigned i = threadIdx.x; i < topk_bins; i += blockDim.x) bins[i] = 0;
  __syncthreads();
  const TopKSelect s = *sel;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x * 4;
  for (std::size_t i = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4; i < p.n; i += stride) {
    float x[4];
    if constexpr (Prepare) p(i, x);
    else load_quad(v, i, p.n, p.vector, x);
    for (std::size_t c = 0; c < 4 && i + c < p.n; ++c) {
      const long bin = s.bin(codec::detail::magnitude_bits(x[c]), pass);
      if (bin >= 0) atomicAdd(&bins[bin], 1u);
    }
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < topk_bins; i += blockDim.x)
    if (bins[i]) atomicAdd(&hist[i], bins[i]);
}

/// One warp chooses digit `pass` (TopKSelect::lane_bins, first_digit).
template <class = void>
__global__ void topk_choose_kernel(const std::uint32_t* hist, TopKSelect* sel, const unsigned pass, const std::size_t k,
                                   const unsigned long long* verdict) {
  if (topk_abort(verdict)) return;
  const unsigned lane = threadIdx.x;
  unsigned hi, lo;
  TopKSelect::lane_bins(pass, lane, hi, lo);
  unsigned long long mine = 0;
  for (unsigned d = lo; d <= hi; ++d) mine += hist[d];
  unsigned long long before = mine;  // inclusive sum over lanes 0..lane (the higher bins)
  for (unsigned o = 1; o < 32; o *= 2) {
    const unsigned long long up = __shfl_up_sync(0xffffffffu, before, o);
    if (lane >= o) before += up;
  }
  std::size_t above = sel->above + before - mine;
  const long d = codec::detail::first_digit(hist, hi, lo, k, above);
  const unsigned found = __ballot_sync(0xffffffffu, d >= 0);  // lane 31 always finds (bin 0)
  if (lane == static_cast<unsigned>(__ffs(static_cast<int>(found)) - 1)) sel->choose(pass, static_cast<unsigned>(d), above);
}

/// Per tile: (above << 32) | equal, summed over its threads.
template <class = void>
__global__ void __launch_bounds__(topk_threads) topk_count_kernel(const TopKTiles t, const TopKSelect* sel,
                                                                   unsigned long long* counts,
                                                                   const unsigned long long* verdict) {
  using Reduce = cub::BlockReduce<unsigned long long, topk_threads>;
  __shared__ typename Reduce::TempStorage temp;
  if (topk_abort(verdict)) return;
  const unsigned long long total = Reduce(temp).Sum(t.count(blockIdx.x, threadIdx.x, sel->prefix));
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

/// Per tile: the kept elements into the payload (and residual / acc); block 0 writes the header.
template <class = void>
__global__ void __launch_bounds__(topk_threads) topk_place_kernel(const TopKTiles t, const TopKSelect* sel,
                                                                   const unsigned long long* offsets, const Frame frame,
                                                                   const unsigned long long* verdict) {
  using Scan = cub::BlockScan<unsigned long long, topk_threads>;
  __shared__ typename Scan::TempStorage temp;
  if (topk_abort(verdict)) return;
  write_header(frame);
  if (t.n == 0) return;
  const TopKSelect s = *sel;
  unsigned long long before;
  Scan(temp).ExclusiveSum(t.count(blockIdx.x, threadIdx.x, s.prefix), before);
  t.place(blockIdx.x, threadIdx.x, s.prefix, t.k - s.above, offsets[blockIdx.x] + before);
}

inline unsigned stride_blocks(std::size_t threads) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return std::min(blocks_for(threads), static_cast<unsigned>(sms) * 8);
}

/// The whole top-k encode of p's values into t's payload; `verdict`: a reduce's
/// validation (null for an encode).
inline void launch_topk_encode(const TopKPrepare& p, TopKTiles t, const Frame& frame, const unsigned long long* verdict,
                               cudaStream_t s) {
  const std::size_t n = p.n, tiles = TopKTiles::tiles(n);
  if (n == 0) {  // k = 0: the header alone
    topk_place_kernel<><<<1, topk_threads, 0, s>>>(t, nullptr, nullptr, frame, verdict);
    check(cudaGetLastError(), "top-k kernel launch");
    return;
  }
  const auto items = static_cast<int>(tiles);
  std::size_t scan_bytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<unsigned long long*>(nullptr),
                                      static_cast<unsigned long long*>(nullptr), items, s), "top-k scan size");
  // hist[3][bins] | select | counts[tiles] | offsets[tiles] | scan temp
  const std::size_t hist_bytes = 3 * topk_bins * sizeof(std::uint32_t), sel_at = hist_bytes, counts_at = sel_at + 64;
  const std::size_t offsets_at = counts_at + tiles * 8, temp_at = (offsets_at + tiles * 8 + 255) / 256 * 256;
  StreamBuffer<std::byte> scratch(temp_at + scan_bytes, s);
  std::byte* base = scratch.get();
  auto* hist = reinterpret_cast<std::uint32_t*>(base);
  auto* sel = reinterpret_cast<TopKSelect*>(base + sel_at);
  auto* counts = reinterpret_cast<unsigned long long*>(base + counts_at);
  auto* offsets = reinterpret_cast<unsigned long long*>(base + offsets_at);
  check(cudaMemsetAsync(base, 0, counts_at, s), "cudaMemsetAsync");

  const unsigned blocks = stride_blocks((n + 3) / 4);
  topk_hist_kernel<true><<<blocks, block_threads, 0, s>>>(p, nullptr, sel, 0, hist, verdict);
  topk_choose_kernel<><<<1, 32, 0, s>>>(hist, sel, 0, t.k, verdict);
  for (unsigned pass = 1; pass < codec::detail::topk_passes; ++pass) {
    topk_hist_kernel<false><<<blocks, block_threads, 0, s>>>(p, t.v, sel, pass, hist + pass * topk_bins, verdict);
    topk_choose_kernel<><<<1, 32, 0, s>>>(hist + pass * topk_bins, sel, pass, t.k, verdict);
  }
  topk_count_kernel<><<<static_cast<unsigned>(tiles), topk_threads, 0, s>>>(t, sel, counts, verdict);
  check(cub::DeviceScan::ExclusiveSum(base + temp_at, scan_bytes, counts, offsets, items, s), "top-k scan");
  topk_place_kernel<><<<static_cast<unsigned>(tiles), topk_threads, 0, s>>>(t, sel, offsets, frame, verdict);
  check(cudaGetLastError(), "top-k kernel launch");
}

/// Index validation of a received payload (every block checks the header first).
template <class = void>
__global__ void __launch_bounds__(block_threads) topk_validate_kernel(const std::byte* payload, const std::size_t n,
                                                                       const std::size_t k, unsigned long long* verdict,
                                                                       const Frame frame) {
  if (!admit(frame)) {
    if (threadIdx.x == 0) atomicMin(verdict, topk_header_fault);
    return;
  }
  const codec::detail::TopKIndexBad bad{payload, n};
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < k; j += std::size_t{gridDim.x} * blockDim.x)
    if (bad(j)) atomicMin(verdict, j);
}

/// decode: out = 0 before the scatter, once the payload is known good.
template <class = void>
__global__ void __launch_bounds__(block_threads) topk_fill_kernel(float* out, const std::size_t n,
                                                                   const unsigned long long* verdict) {
  if (topk_abort(verdict)) return;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = 0.0f;
}

/// acc[index_j] += value_j, once the payload is known good; else block 0 records a bad index.
template <class = void>
__global__ void __launch_bounds__(block_threads) topk_scatter_kernel(const std::byte* payload, float* acc, const std::size_t k,
                                                                      const unsigned long long* verdict, const FaultSite site) {
  const unsigned long long v = *verdict;
  if (v != topk_good) {
    if (v < topk_header_fault && blockIdx.x == 0 && threadIdx.x == 0 && claim(site))
      describe_index(*site.fault, site, static_cast<std::uint32_t>(v), codec::detail::load<std::uint32_t>(payload + 4 * v));
    return;
  }
  const codec::detail::TopKScatterKernel scatter{payload, acc, k};
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < k; j += std::size_t{gridDim.x} * blockDim.x)
    scatter(j);
}

/// The decoders' sequence: validate, [fill,] scatter. `verdict`: scratch, reused by a reduce.
template <bool Add>
void launch_topk_decode(const std::byte* payload, float* acc, std::size_t n, std::size_t k, const Frame& frame,
                        unsigned long long* verdict, cudaStream_t s) {
  check(cudaMemsetAsync(verdict, 0xff, sizeof *verdict, s), "cudaMemsetAsync");
  const unsigned blocks = stride_blocks(k);
  topk_validate_kernel<><<<blocks, block_threads, 0, s>>>(payload, n, k, verdict, frame);
  if constexpr (!Add) topk_fill_kernel<><<<stride_blocks(n), block_threads, 0, s>>>(acc, n, verdict);
  topk_scatter_kernel<><<<blocks, block_threads, 0, s>>>(payload, acc, k, verdict, frame.site);
  check(cudaGetLastError(), "top-k kernel launch");
}

}  // namespace gradsync::cuda::detail
