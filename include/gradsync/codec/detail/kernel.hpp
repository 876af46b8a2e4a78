#pragma once
/// The one place codec kernels are launched: a functor body runs for every index of a range
/// through a Thrust execution policy. Host builds use `thrust::host` (every test runs there);
/// the CUDA twins (.cu) pass `thrust::device` with device pointers to the very same functors.
///
/// \code
///   detail::for_each_index(thrust::host, buckets, QsgdEncodeKernel<8>{...});
/// \endcode
///
/// A host-only translation unit must pick a host device system before any Thrust header, or
/// <thrust/execution_policy.h> drags in the CUDA system; we do that here unless the user did.
#if !defined(THRUST_DEVICE_SYSTEM) && !defined(__CUDACC__)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#endif
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../core/host_device.hpp"

namespace gradsync::codec::detail {

/// Calls `f(i)` for every i in [0, n) on the system of `policy`.
/// \tparam Policy a Thrust execution policy (thrust::host, thrust::device, thrust::omp::par)
/// \tparam F      a copyable functor with `GRADSYNC_HD void operator()(std::size_t) const`
template <class Policy, class F>
void for_each_index(const Policy& policy, std::size_t n, const F& f) {
  thrust::for_each(policy, thrust::counting_iterator<std::size_t>(0),
                   thrust::counting_iterator<std::size_t>(n), f);
}

GRADSYNC_HD constexpr std::size_t bucket_count(std::size_t n, std::size_t bucket) { return (n + bucket - 1) / bucket; }

/// Elements [begin, begin + len) of bucket b in a unit of n split into buckets of `bucket`.
struct BucketRange {
  std::size_t begin, len;
};
GRADSYNC_HD inline BucketRange bucket_range(std::size_t b, std::size_t bucket, std::size_t n) {
  const std::size_t begin = b * bucket;
  return {begin, n - begin < bucket ? n - begin : bucket};
}

/// Aliasing-safe loads and stores on wire bytes (compile to plain moves). Unaligned on a host; on
/// a device every access is naturally aligned (the device codecs take 4-byte aligned wire
/// buffers, and every field sits at a multiple of its size), so it is one load, not byte loads.
template <class T>
GRADSYNC_HD inline T load(const std::byte* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
#endif
}
template <class T>
GRADSYNC_HD inline void store(std::byte* p, T v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<T*>(p) = v;
#else
  memcpy(p, &v, sizeof(T));
#endif
}
GRADSYNC_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
GRADSYNC_HD inline float bits_float(std::uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace gradsync::codec::detail
