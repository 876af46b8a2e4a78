#pragma once
/// The QSGD kernels (qsgd_warp.hpp): one warp per bucket.
#include "../../codec/detail/reduce.hpp"
#include "launch.cuh"
#include "qsgd_warp.hpp"

namespace gradsync::cuda::detail {

/// encode and reduce: statistics, packing, residual / acc in one pass over the bucket.
/// \tparam Cached groups a lane keeps in registers: 4 up to the default bucket of 512 (fewer
///         registers, more warps per SM), else 8 (q.cached(): up to 1024; larger ones are read twice).
template <unsigned Bits, Op op, bool Feedback, std::size_t Cached>
__global__ void __launch_bounds__(block_threads, 2) qsgd_kernel(const QsgdWarp<Bits, op, Feedback> q, const Frame frame) {
  using Q = QsgdWarp<Bits, op, Feedback>;
  using Field = typename Q::Field;
  constexpr std::size_t group = Q::L::group;
  extern __shared__ __align__(16) unsigned char smem[];
  if (!admit(frame)) return;
  write_header(frame);
  const unsigned lane = threadIdx.x % 32;
  const std::size_t bk = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (bk >= codec::detail::bucket_count(q.b.n, q.bucket)) return;  // whole warps
  unsigned char* mine = smem + threadIdx.x / 32 * q.smem_bytes();
  Field* fields = reinterpret_cast<Field*>(mine);
  float* partial = reinterpret_cast<float*>(mine + group * sizeof(Field));
  float* staged = reinterpret_cast<float*>(mine + (group * sizeof(Field) + 64 + 15) / 16 * 16);
  const auto [begin, len] = codec::detail::bucket_range(bk, q.bucket, q.b.n);
  const std::size_t groups = (len + group - 1) / group;
  const float step = op == Op::reduce ? q.step_in(bk) : 0.0f;

  const auto l2_scale = [&](const auto& values) {
    if (lane < codec::detail::reduce_lanes) partial[lane] = codec::detail::lane_sum_squares(values, len, lane);
    __syncwarp();
    return sqrtf(codec::detail::fold_lanes(partial));
  };
  const auto emit = [&](std::size_t g, const float* x, float scale) {
    q.quantize(begin, g, lane, x, scale, fields);
    __syncwarp();
    q.store_words(bk, g, lane, fields);
    __syncwarp();
  };
  float scale;
  static_assert(Cached <= Q::cached_groups);
  if (q.cached()) {  // the launch picks Cached = 4 only for buckets of <= 512
    float x[Cached][4], e[Cached][4];
    std::uint32_t m = 0;
#pragma unroll
    for (std::size_t g = 0; g < Cached; ++g)  // every load in flight before the first use
      if (g < groups) q.load(begin, g, lane, x[g], e[g]);
#pragma unroll
    for (std::size_t g = 0; g < Cached; ++g)
      if (g < groups) {
        q.combine(bk, begin, g, lane, step, x[g], e[g]);
        m = max(m, Q::max_bits(x[g]));
      }
    if (q.l2) {
#pragma unroll
      for (std::size_t g = 0; g < Cached; ++g)
        if (g < groups) store4(staged + g * group + 4 * lane, x[g]);
      __syncwarp();
      scale = l2_scale(static_cast<const float*>(staged));
    } else {
      scale = codec::detail::bits_float(lanes_max(0xffffffffu, m, 32));
    }
    if (lane == 0) q.store_scale(bk, scale);
#pragma unroll
    for (std::size_t g = 0; g < Cached; ++g)
      if (g < groups) emit(g, x[g], scale);
  } else {  // too large to keep: the values are computed again for the packing
    if (q.l2) {
      scale = l2_scale(typename Q::At{q, bk, begin, step});
    } else {
      std::uint32_t m = 0;
      for (std::size_t g = 0; g < groups; ++g) {
        float x[4];
        q.gather(bk, begin, g, lane, step, x);
        m = max(m, Q::max_bits(x));
      }
      scale = codec::detail::bits_float(lanes_max(0xffffffffu, m, 32));
    }
    if (lane == 0) q.store_scale(bk, scale);
    for (std::size_t g = 0; g < groups; ++g) {
      float x[4];
      q.gather(bk, begin, g, lane, step, x);
      emit(g, x, scale);
    }
  }
}

/// decode and decode_add.
template <unsigned Bits, Op op>
__global__ void __launch_bounds__(block_threads) qsgd_decode_kernel(const QsgdWarp<Bits, op, false> q, const Frame frame) {
  if (!admit(frame)) return;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t bk = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (bk >= codec::detail::bucket_count(q.b.n, q.bucket)) return;
  const auto [begin, len] = codec::detail::bucket_range(bk, q.bucket, q.b.n);
  const float step = q.step_in(bk);
  for (std::size_t g = 0; g * QsgdWarp<Bits, op, false>::L::group < len; ++g) q.decode(bk, begin, g, lane, step);
}

template <unsigned Bits, Op op, bool Feedback>
void launch_qsgd(const QsgdWarp<Bits, op, Feedback>& q, const Frame& frame, cudaStream_t s) {
  const unsigned blocks = blocks_for(codec::detail::bucket_count(q.b.n, q.bucket) * 32);
  if constexpr (encodes(op)) {
    const std::size_t smem = q.smem_bytes() * (block_threads / 32);
    if (q.bucket <= 4 * QsgdWarp<Bits, op, Feedback>::L::group)
      qsgd_kernel<Bits, op, Feedback, 4><<<blocks, block_threads, smem, s>>>(q, frame);
    else
      qsgd_kernel<Bits, op, Feedback, 8><<<blocks, block_threads, smem, s>>>(q, frame);
  } else {
    qsgd_decode_kernel<<<blocks, block_threads, 0, s>>>(q, frame);
  }
  check(cudaGetLastError(), "QSGD kernel launch");
}

}  // namespace gradsync::cuda::detail
