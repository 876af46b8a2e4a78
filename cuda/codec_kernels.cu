// The codec kernels on the CUDA system: the very functors the host codecs run through
// thrust::host (and that the host tests cover), launched with thrust::device on device memory.
// Built whenever nvcc is found, so CI proves they still compile for the GPU; the device entry
// points here are what the CUDA backend (issue 6) calls, with the same wire format.
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <gradsync/codec/detail/kernel.hpp>
#include <gradsync/codec/detail/narrow.hpp>
#include <gradsync/codec/detail/onebit_kernels.hpp>
#include <gradsync/codec/detail/qsgd_kernels.hpp>

namespace gradsync::codec::cuda {

using namespace gradsync::codec::detail;

/// fp16 / bf16 payload of n device floats (no header: the host writes it).
template <class Format>
void narrow_encode(const float* in, std::byte* payload, std::size_t n) {
  for_each_index(thrust::device, bucket_count(n, narrow_chunk), NarrowEncodeKernel<Format>{in, payload, n});
}
template <class Format, bool Add>
void narrow_decode(const std::byte* payload, float* out, std::size_t n) {
  for_each_index(thrust::device, bucket_count(n, narrow_chunk), NarrowDecodeKernel<Format, Add>{payload, out, n});
}

/// QSGD payload (per-bucket scale + packed levels) of n device floats.
template <unsigned Bits>
void qsgd_encode(const float* in, std::byte* payload, std::size_t n, std::size_t bucket, bool l2, std::uint64_t key) {
  for_each_index(thrust::device, bucket_count(n, bucket), QsgdEncodeKernel<Bits>{in, payload, n, bucket, l2, key});
}
template <unsigned Bits, bool Add>
void qsgd_decode(const std::byte* payload, float* out, std::size_t n, std::size_t bucket) {
  for_each_index(thrust::device, bucket_count(n, bucket), QsgdDecodeKernel<Bits, Add>{payload, out, n, bucket});
}

/// 1-bit payload with error feedback (residual updated in place) of n device floats.
void onebit_encode(const float* in, float* residual, std::byte* payload, std::size_t n, std::size_t bucket) {
  for_each_index(thrust::device, bucket_count(n, bucket), OneBitEncodeKernel<true>{in, residual, payload, n, bucket});
}
template <bool Add>
void onebit_decode(const std::byte* payload, float* out, std::size_t n, std::size_t bucket) {
  for_each_index(thrust::device, bucket_count(n, bucket), OneBitDecodeKernel<Add>{payload, out, n, bucket});
}

template void narrow_encode<Fp16Format>(const float*, std::byte*, std::size_t);
template void narrow_encode<Bf16Format>(const float*, std::byte*, std::size_t);
template void narrow_decode<Fp16Format, true>(const std::byte*, float*, std::size_t);
template void narrow_decode<Bf16Format, false>(const std::byte*, float*, std::size_t);
template void qsgd_encode<2>(const float*, std::byte*, std::size_t, std::size_t, bool, std::uint64_t);
template void qsgd_encode<4>(const float*, std::byte*, std::size_t, std::size_t, bool, std::uint64_t);
template void qsgd_encode<8>(const float*, std::byte*, std::size_t, std::size_t, bool, std::uint64_t);
template void qsgd_encode<16>(const float*, std::byte*, std::size_t, std::size_t, bool, std::uint64_t);
template void qsgd_decode<8, true>(const std::byte*, float*, std::size_t, std::size_t);
template void qsgd_decode<4, false>(const std::byte*, float*, std::size_t, std::size_t);
template void onebit_decode<true>(const std::byte*, float*, std::size_t, std::size_t);

}  // namespace gradsync::codec::cuda
