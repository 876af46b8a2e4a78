#pragma once
/// Device codecs: the host codecs' wire format, produced and consumed on a CUDA device, so a
/// CUDA rank and a host rank interoperate byte for byte (tests/cuda checks it).
///
/// \code
///   // d_grad, d_wire, d_residual: device memory; include from a .cu file (CUB is device-only)
///   const auto c = gradsync::codec::AnyCodec::parse("qsgd4");
///   std::size_t bytes = gradsync::cuda::encode(c, d_grad, d_wire, {.seed = 1, .iteration = t}, stream);
///   gradsync::cuda::decode_add(c, d_wire.first(bytes), d_sum, stream);
/// \endcode
///
/// Every per-element step is the host codec's own GRADSYNC_HD functor (codec/detail/*), run
/// through Thrust's CUDA system instead of thrust::host. Only the primitives differ, with the
/// same result by construction:
///   - QSGD scale: a CUB block reduction per bucket (max |v|: integer max of magnitude bits,
///     exact in any order; 2-norm: the host's 16 fmaf lanes, one thread each, folded in order);
///   - QSGD packing one word per thread, decode and fp16/bf16 one element per thread (the host
///     runs a bucket or a long run per index);
///   - TopK selection: CUB's stable radix sort by descending magnitude (first k = the k largest,
///     ties to the lower index, the wire format's rule), instead of the host's radix select.
/// Encode is asynchronous on `stream`; decode reads the 16-byte header back to the host (and
/// TopK's index check) before it launches, so it synchronizes the stream. Spans are device
/// memory; `ctx.residual` too.
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda/functional>
#include <thrust/execution_policy.h>
#include <thrust/find.h>
#include <thrust/iterator/counting_iterator.h>

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <variant>

#include "../codec/any.hpp"
#include "../core/error.hpp"

namespace gradsync::cuda {

/// A failed CUDA call becomes a std::runtime_error naming it.
inline void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("gradsync: ") + what + " failed: " + cudaGetErrorString(rc));
}

namespace detail {
using namespace gradsync::codec::detail;
namespace gc = gradsync::codec;

inline auto policy(cudaStream_t stream) { return thrust::cuda::par_nosync.on(stream); }

/// Stream-ordered scratch memory (cudaMallocAsync / cudaFreeAsync).
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

inline int checked_items(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw UsageError("gradsync: device top-k sorts at most 2^31-1 elements per unit; slice the layer");
  return static_cast<int>(n);
}

inline constexpr unsigned scale_threads = 128;

/// One block per bucket: the bucket's scale into the first 4 bytes of its record.
template <unsigned Bits>
__global__ void __launch_bounds__(scale_threads) qsgd_scale_kernel(const float* in, std::byte* out, std::size_t n,
                                                                    std::size_t bucket, bool l2) {
  using Reduce = cub::BlockReduce<std::uint32_t, scale_threads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ float lanes[reduce_lanes];
  const std::size_t b = blockIdx.x;
  const auto [begin, len] = bucket_range(b, bucket, n);
  const float* v = in + begin;
  float scale;
  if (l2) {
    if (threadIdx.x < reduce_lanes) lanes[threadIdx.x] = lane_sum_squares(v, len, threadIdx.x);
    __syncthreads();
    scale = sqrtf(fold_lanes(lanes));
  } else {
    std::uint32_t m = 0;
    for (std::size_t i = threadIdx.x; i < len; i += scale_threads) m = ::cuda::maximum<>{}(m, magnitude_bits(v[i]));
    scale = bits_float(Reduce(temp).Reduce(m, ::cuda::maximum<>{}));
  }
  if (threadIdx.x == 0) store(out + b * QsgdLayout<Bits>::record_bytes(bucket), scale);
}

// ---- payloads, one overload per codec (the host's encode_payload / decode_payload) ----

template <class F>
void encode_payload(const Narrow<F>&, std::span<const float> in, std::byte* payload, const gc::EncodeContext&,
                    cudaStream_t s) {
  for_each_index(policy(s), in.size(), NarrowEncodeKernel<F>{in.data(), payload, in.size(), 1});
}
template <bool Add, class F>
void decode_payload(const Narrow<F>&, const std::byte* payload, std::span<float> out, cudaStream_t s) {
  for_each_index(policy(s), out.size(), NarrowDecodeKernel<F, Add>{payload, out.data(), out.size(), 1});
}

template <unsigned Bits>
void encode_payload(const gc::Qsgd<Bits>& c, std::span<const float> in, std::byte* payload,
                    const gc::EncodeContext& ctx, cudaStream_t s) {
  const std::size_t n = in.size(), buckets = bucket_count(n, c.bucket);
  if (buckets == 0) return;  // an empty unit: header only (a grid of 0 blocks is a launch error)
  qsgd_scale_kernel<Bits><<<static_cast<unsigned>(buckets), scale_threads, 0, s>>>(in.data(), payload, n, c.bucket,
                                                                                     c.norm == gc::QsgdNorm::l2);
  check(cudaGetLastError(), "QSGD scale kernel launch");
  for_each_index(policy(s), QsgdPackWordKernel<Bits>::indices(n, c.bucket),
                 QsgdPackWordKernel<Bits>{in.data(), payload, n, c.bucket, stream_key(ctx)});
}
template <bool Add, unsigned Bits>
void decode_payload(const gc::Qsgd<Bits>& c, const std::byte* payload, std::span<float> out, cudaStream_t s) {
  for_each_index(policy(s), out.size(), QsgdDecodeElementKernel<Bits, Add>{payload, out.data(), c.bucket});
}

inline void encode_payload(const gc::OneBit& c, std::span<const float> in, std::byte* payload,
                           const gc::EncodeContext& ctx, cudaStream_t s) {
  const std::size_t n = in.size(), buckets = bucket_count(n, c.bucket);
  if (ctx.residual.empty())
    for_each_index(policy(s), buckets, OneBitEncodeKernel<false>{in.data(), nullptr, payload, n, c.bucket});
  else
    for_each_index(policy(s), buckets, OneBitEncodeKernel<true>{in.data(), ctx.residual.data(), payload, n, c.bucket});
}
template <bool Add>
void decode_payload(const gc::OneBit& c, const std::byte* payload, std::span<float> out, cudaStream_t s) {
  for_each_index(policy(s), bucket_count(out.size(), c.bucket), OneBitDecodeKernel<Add>{payload, out.data(), out.size(), c.bucket});
}

inline void encode_payload(const gc::TopK& c, std::span<const float> in, std::byte* payload,
                           const gc::EncodeContext& ctx, cudaStream_t s) {
  const std::size_t n = in.size(), k = c.kept(n);
  const int items = checked_items(n);
  const float* v = in.data();
  float* residual = ctx.residual.empty() ? nullptr : ctx.residual.data();
  if (residual) {
    for_each_index(policy(s), n, AddKernel{in.data(), residual});
    v = residual;
  }
  StreamBuffer<std::uint32_t> keys(n, s), sorted_keys(n, s), index(n, s), order(n, s);
  for_each_index(policy(s), n, TopKKeyKernel{v, keys.get(), index.get()});
  // Stable: among equal magnitudes the lower index comes first, the wire format's tie rule.
  // Magnitude bits are below 2^31, so bit 31 needs no pass.
  std::size_t temp_bytes = 0, more = 0;
  check(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, keys.get(), sorted_keys.get(), index.get(),
                                                  order.get(), items, 0, 31, s), "top-k sort size");
  check(cub::DeviceRadixSort::SortKeys(nullptr, more, order.get(), index.get(), static_cast<int>(k), 0, 32, s),
        "top-k index sort size");
  StreamBuffer<std::byte> temp(std::max(temp_bytes, more), s);
  temp_bytes = more = std::max(temp_bytes, more);
  check(cub::DeviceRadixSort::SortPairsDescending(temp.get(), temp_bytes, keys.get(), sorted_keys.get(), index.get(),
                                                  order.get(), items, 0, 31, s), "top-k sort");
  // The k winners in ascending index order (payload order).
  check(cub::DeviceRadixSort::SortKeys(temp.get(), more, order.get(), index.get(), static_cast<int>(k), 0, 32, s),
        "top-k index sort");
  for_each_index(policy(s), k, TopKPutKernel{v, residual, index.get(), payload, k});
}
template <bool Add>
void decode_payload(const gc::TopK& c, const std::byte* payload, std::span<float> out, cudaStream_t s) {
  const std::size_t n = out.size(), k = c.kept(n);
  const auto first = thrust::counting_iterator<std::size_t>(0);
  const auto bad = thrust::find_if(thrust::cuda::par.on(s), first, first + k, TopKIndexBad{payload, n});
  if (bad != first + k) {
    std::uint32_t index = 0;
    check(cudaMemcpy(&index, payload + 4 * *bad, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    throw WireError("gradsync: topk payload rejected: index " + std::to_string(index) + " at position " +
                    std::to_string(*bad) + " is out of range or not ascending (unit of " + std::to_string(n) + ")");
  }
  if constexpr (!Add) check(cudaMemsetAsync(out.data(), 0, out.size_bytes(), s), "cudaMemsetAsync");
  for_each_index(policy(s), k, TopKScatterKernel{payload, out.data(), k});
}

inline void write_header(std::byte* out, const gc::WireHeader& h, cudaStream_t s) {
  // From pageable memory the copy is staged before the call returns: `h` may go out of scope.
  check(cudaMemcpyAsync(out, &h, gc::header_bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (header)");
}
inline gc::WireHeader read_header(std::span<const std::byte> wire, const char* name, cudaStream_t s) {
  if (wire.size() < gc::header_bytes)
    throw WireError(std::string("gradsync: ") + name + " payload rejected: truncated (" + std::to_string(wire.size()) +
                    " bytes, the header alone is 16)");
  gc::WireHeader h;
  check(cudaMemcpyAsync(&h, wire.data(), gc::header_bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (header)");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return h;
}

template <bool Add>
void decode_fp32(std::span<const std::byte> wire, std::span<float> out, cudaStream_t s) {
  check_header(read_header(wire, "fp32", s), wire.size(), gc::Identity::id, out.size(), "fp32");
  const std::byte* payload = wire.data() + gc::header_bytes;
  if constexpr (Add) for_each_index(policy(s), out.size(), AddWireKernel{payload, out.data()});
  else check(cudaMemcpyAsync(out.data(), payload, out.size_bytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
}

template <bool Add, class C>
void decode(const C& c, std::span<const std::byte> wire, std::span<float> out, cudaStream_t s);

template <class C>
std::size_t encode(const C& c, std::span<const float> in, std::span<std::byte> out, const gc::EncodeContext& ctx,
                   cudaStream_t s) {
  const std::size_t n = in.size();
  std::byte* payload = out.data() + gc::header_bytes;
  if constexpr (std::same_as<C, gc::AnyCodec>) {
    return std::visit([&](const auto& concrete) { return encode(concrete, in, out, ctx, s); }, c.variant());
  } else if constexpr (std::same_as<C, gc::Identity>) {
    const std::size_t bytes = c.encoded_bytes(n);
    if (out.size() < bytes) throw UsageError("gradsync: fp32 encode needs an output of encoded_bytes(n) bytes");
    write_header(out.data(), {.codec = c.id, .elements = static_cast<std::uint32_t>(n),
                              .payload_bytes = static_cast<std::uint32_t>(n * sizeof(float))}, s);
    check(cudaMemcpyAsync(payload, in.data(), in.size_bytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    return bytes;
  } else if constexpr (requires { c.inner; }) {  // ErrorFeedback<Inner>, as its host encode
    std::span<float> e = ctx.residual;
    if (e.empty()) return encode(c.inner, in, out, ctx, s);
    if (e.size() != n)
      throw UsageError("gradsync: " + std::string(c.name()) + " residual has " + std::to_string(e.size()) +
                       " elements, the unit " + std::to_string(n) + "; keep one residual per unit");
    StreamBuffer<float> corrected(n, s);
    for_each_index(policy(s), n, SumKernel{in.data(), e.data(), corrected.get()});
    gc::EncodeContext plain = ctx;
    plain.residual = {};
    const std::size_t bytes = encode(c.inner, std::span<const float>(corrected.get(), n), out, plain, s);
    decode<false>(c.inner, out.first(bytes), e, s);
    for_each_index(policy(s), n, ErrorKernel{corrected.get(), e.data()});
    return bytes;
  } else {
    const EncodePlan plan = plan_encode(c, n, out.size(), ctx.residual.size());
    write_header(out.data(), plan.header, s);
    encode_payload(c, in, payload, ctx, s);
    check(cudaGetLastError(), "codec kernel launch");
    return plan.bytes;
  }
}

template <bool Add, class C>
void decode(const C& c, std::span<const std::byte> wire, std::span<float> out, cudaStream_t s) {
  if constexpr (std::same_as<C, gc::AnyCodec>) {
    std::visit([&](const auto& concrete) { decode<Add>(concrete, wire, out, s); }, c.variant());
  } else if constexpr (std::same_as<C, gc::Identity>) {
    decode_fp32<Add>(wire, out, s);
  } else if constexpr (requires { c.inner; }) {
    decode<Add>(c.inner, wire, out, s);
  } else {
    const std::string name(c.name());
    check_framed(c, read_header(wire, name.c_str(), s), wire.size(), out.size());
    decode_payload<Add>(c, wire.data() + gc::header_bytes, out, s);
    check(cudaGetLastError(), "codec kernel launch");
  }
}
}  // namespace detail

/// Writes header + payload of device floats `in` into device bytes `out` (at least
/// codec.encoded_bytes(in.size())), as codec.encode does on the host; returns the wire size.
/// Asynchronous on `stream`.
template <codec::Codec C>
std::size_t encode(const C& codec, std::span<const float> in, std::span<std::byte> out,
                   const codec::EncodeContext& ctx = {}, cudaStream_t stream = nullptr) {
  return detail::encode(codec, in, out, ctx, stream);
}
/// out = decoded device wire form (validated first, as on the host: throws WireError).
template <codec::Codec C>
void decode(const C& codec, std::span<const std::byte> wire, std::span<float> out, cudaStream_t stream = nullptr) {
  detail::decode<false>(codec, wire, out, stream);
}
/// acc += decoded device wire form (validated first, as on the host: throws WireError).
template <codec::Codec C>
void decode_add(const C& codec, std::span<const std::byte> wire, std::span<float> acc, cudaStream_t stream = nullptr) {
  detail::decode<true>(codec, wire, acc, stream);
}

}  // namespace gradsync::cuda

#if defined(GRADSYNC_CUDA_CODECS_LIBRARY)  // instantiated once in gradsync::cuda_codecs (cuda/device_codecs.cu)
namespace gradsync::cuda {
extern template std::size_t encode(const codec::AnyCodec&, std::span<const float>, std::span<std::byte>,
                                   const codec::EncodeContext&, cudaStream_t);
extern template void decode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
extern template void decode_add(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
}  // namespace gradsync::cuda
#endif
