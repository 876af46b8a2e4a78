#pragma once
/// The 1-bit kernels (onebit_team.hpp): a team of 8 threads per bucket.
#include "launch.cuh"
#include "onebit_team.hpp"

namespace gradsync::cuda::detail {

/// The team of this thread: its bucket, its lane in the team, and the team's lanes in the warp.
struct TeamSlot {
  std::size_t bucket;
  unsigned lane, mask;
  __device__ TeamSlot() {
    const std::size_t id = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    bucket = id / 8;
    lane = static_cast<unsigned>(id % 8);
    mask = 0xffu << (threadIdx.x % 32 / 8 * 8);
  }
};

/// encode and reduce: statistics, sign words, residual / acc in one pass over the bucket.
template <Op op, bool Feedback>
__global__ void __launch_bounds__(block_threads, 2) onebit_kernel(const OneBitTeam<op, Feedback> t, const Frame frame) {
  using T = OneBitTeam<op, Feedback>;
  using SignMeans = codec::detail::SignMeans;
  struct TeamShared {
    codec::detail::SignSums sums;
    SignMeans means;
  };
  __shared__ TeamShared shared[block_threads / T::lanes];
  if (!admit(frame)) return;
  write_header(frame);
  const TeamSlot slot;
  const unsigned lane = slot.lane;
  const std::size_t bk = slot.bucket;
  if (bk >= codec::detail::bucket_count(t.b.n, t.bucket)) return;  // whole teams
  TeamShared& sh = shared[threadIdx.x / T::lanes];
  const auto [begin, len] = codec::detail::bucket_range(bk, t.bucket, t.b.n);
  const std::size_t words = (len + 31) / 32;

  const auto means = [&](const typename T::Partial& p) {
    p.put(sh.sums, lane);
    __syncwarp(slot.mask);
    if (lane == 0) {
      sh.sums.fold();
      sh.means = codec::detail::sign_means(sh.sums, len, words);
    }
    __syncwarp(slot.mask);
    const SignMeans m = sh.means;
    if (lane < 2) t.store_entry(bk, lane, codec::detail::float_bits(lane == 0 ? m.plus : m.minus));
    return m;
  };
  const auto emit = [&](std::size_t w, const float* x, SignMeans m) {
    const std::uint32_t bits = lanes_or(slot.mask, T::sign_bits(x, lane), T::lanes);
    if (lane == (2 + w) % T::lanes) t.store_entry(bk, 2 + w, bits);
    t.finish(begin, w, lane, x, m);
  };
  typename T::Partial p;
  if (t.cached()) {
    float x[T::cached_words][4];
#pragma unroll
    for (std::size_t w = 0; w < T::cached_words; ++w)
      if (w < words) {
        t.gather(bk, begin, w, lane, x[w]);
        p.take(w, x[w]);
      }
    const SignMeans m = means(p);
#pragma unroll
    for (std::size_t w = 0; w < T::cached_words; ++w)
      if (w < words) emit(w, x[w], m);
  } else {  // too large to keep: the values are computed again for the sign words
    for (std::size_t w = 0; w < words; ++w) {
      float x[4];
      t.gather(bk, begin, w, lane, x);
      p.take(w, x);
    }
    const SignMeans m = means(p);
    for (std::size_t w = 0; w < words; ++w) {
      float x[4];
      t.gather(bk, begin, w, lane, x);
      emit(w, x, m);
    }
  }
}

/// decode and decode_add.
template <Op op>
__global__ void __launch_bounds__(block_threads) onebit_decode_kernel(const OneBitTeam<op, false> t, const Frame frame) {
  if (!admit(frame)) return;
  const TeamSlot slot;
  if (slot.bucket >= codec::detail::bucket_count(t.b.n, t.bucket)) return;
  const auto [begin, len] = codec::detail::bucket_range(slot.bucket, t.bucket, t.b.n);
  for (std::size_t w = 0; w * 32 < len; ++w) t.decode(slot.bucket, begin, w, slot.lane);
}

template <Op op, bool Feedback>
void launch_onebit(const OneBitTeam<op, Feedback>& t, const Frame& frame, cudaStream_t s) {
  const unsigned blocks = blocks_for(codec::detail::bucket_count(t.b.n, t.bucket) * OneBitTeam<op, Feedback>::lanes);
  if constexpr (encodes(op))
    onebit_kernel<<<blocks, block_threads, 0, s>>>(t, frame);
  else
    onebit_decode_kernel<<<blocks, block_threads, 0, s>>>(t, frame);
  check(cudaGetLastError(), "1-bit kernel launch");
}

}  // namespace gradsync::cuda::detail
