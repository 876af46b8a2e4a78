#pragma once
/// The 1-bit kernels (onebit_team.hpp): a team of 8 threads per bucket, its fold in shuffles.
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
/// \tparam Cached words a lane keeps in registers: 2 for the default bucket of 64 (fewer
///         registers, more threads per SM), 8 up to 256; larger buckets are read twice.
template <Op op, bool Feedback, unsigned Cached>
__global__ void __launch_bounds__(block_threads, 2) onebit_kernel(const OneBitTeam<op, Feedback> t, const Frame frame) {
  using T = OneBitTeam<op, Feedback>;
  using SignMeans = codec::detail::SignMeans;
  if (!admit(frame)) return;
  write_header(frame);
  const TeamSlot slot;
  const unsigned lane = slot.lane;
  const std::size_t bk = slot.bucket;
  if (bk >= codec::detail::bucket_count(t.b.n, t.bucket)) return;  // whole teams
  const auto [begin, len] = codec::detail::bucket_range(bk, t.bucket, t.b.n);
  const std::size_t words = (len + 31) / 32;

  const auto means = [&](typename T::Partial& p) {
#pragma unroll
    for (unsigned h = T::lanes / 2; h > 0; h /= 2) {
      typename T::Partial o;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        o.count[c] = __shfl_xor_sync(slot.mask, p.count[c], h, T::lanes);
        o.plus[c] = __shfl_xor_sync(slot.mask, p.plus[c], h, T::lanes);
        o.total[c] = __shfl_xor_sync(slot.mask, p.total[c], h, T::lanes);
      }
      p.absorb(o);
    }
    const SignMeans m = p.means(len, words);
    if (lane < 2) t.store_entry(bk, lane, codec::detail::float_bits(lane == 0 ? m.plus : m.minus));
    return m;
  };
  const auto emit = [&](std::size_t w, const float* x, SignMeans m) {
    const std::uint32_t bits = lanes_or(slot.mask, T::sign_bits(x, lane), T::lanes);
    if (lane == (2 + w) % T::lanes) t.store_entry(bk, 2 + w, bits);
    t.finish(begin, w, lane, x, m);
  };
  typename T::Partial p;
  if (Cached <= 2 || words <= Cached) {  // the launch picks Cached = 2 only for buckets of <= 64
    float x[Cached][4], e[Cached][4];
#pragma unroll
    for (std::size_t w = 0; w < Cached; ++w)  // every load in flight before the first use
      if (w < words) t.load(begin, w, lane, x[w], e[w]);
#pragma unroll
    for (std::size_t w = 0; w < Cached; ++w)
      if (w < words) {
        t.combine(bk, begin, w, lane, x[w], e[w]);
        p.take(w, x[w]);
      }
    const SignMeans m = means(p);
#pragma unroll
    for (std::size_t w = 0; w < Cached; ++w)
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
  if constexpr (encodes(op)) {
    static_assert(OneBitTeam<op, Feedback>::cached_words == 8);
    if (t.bucket <= 64) onebit_kernel<op, Feedback, 2><<<blocks, block_threads, 0, s>>>(t, frame);
    else onebit_kernel<op, Feedback, 8><<<blocks, block_threads, 0, s>>>(t, frame);
  }
  else
    onebit_decode_kernel<<<blocks, block_threads, 0, s>>>(t, frame);
  check(cudaGetLastError(), "1-bit kernel launch");
}

}  // namespace gradsync::cuda::detail
