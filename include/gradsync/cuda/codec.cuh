#pragma once
/// Device codecs: the host codecs' wire format, produced and consumed on a CUDA device, so a
/// CUDA rank and a host rank interoperate byte for byte (tests/cuda checks it). Every codec is a
/// single fused pass per call (16-byte accesses, bucket statistics in registers and shared
/// memory, the residual updated in the same pass, the header written and checked inside the
/// kernels); top-k is an exact radix select in a few passes.
///
/// \code
///   // d_grad, d_wire, d_sum, d_residual: device memory; include from a .cu file (CUB is device-only)
///   const auto c = gradsync::codec::AnyCodec::parse("qsgd4");
///   std::size_t bytes = gradsync::cuda::encode(c, d_grad, d_wire, {.seed = 1, .iteration = t}, stream);
///   gradsync::cuda::WireStatus status(stream);
///   gradsync::cuda::decode_add(c, d_wire.first(bytes), d_sum, status, stream);   // asynchronous
///   // the collectives' owner step: sum += decode(wire_in), / ranks, re-encode, sum = what was sent
///   gradsync::cuda::decode_add_encode(c, d_wire_in, d_sum, d_wire_out, ctx, status, stream, ranks);
///   status.check(stream);   // waits; throws the host decoder's WireError for a bad wire form
///   gradsync::cuda::decode_add(c, d_wire.first(bytes), d_sum, stream);   // synchronous: throws at once
/// \endcode
///
/// Which kernel runs (one algorithm per header in cuda/detail/; each step is a GRADSYNC_HD
/// function that tests/cuda/test_host_twins.cpp runs on the host against the host codec):
///   - fp32, fp16, bf16 (+ ef+): narrow_items.hpp, two items of 8 elements per thread;
///   - qsgd2/4/8/16 (+ ef+): qsgd_warp.hpp, one warp per bucket;
///   - onebit: onebit_team.hpp, 8 threads per bucket;
///   - topk: topk_tiles.hpp, radix select (3 histograms), tile counts, a scan, placement.
/// Encode is asynchronous on `stream`. Decoding with a WireStatus is asynchronous too: the
/// kernels check the received header (and top-k's indices) on the device, leave the output
/// untouched when it is bad, and the status reports it (wire_status.cuh). Decoding without one
/// checks the status itself before it returns (a stream synchronization, after the kernels).
/// Spans are device memory (ctx.residual too); wire buffers must be 4-byte aligned (cudaMalloc
/// gives 256), float buffers 16-byte aligned for the 16-byte paths (otherwise they go element by
/// element). Top-k and the synchronous decodes take scratch from the stream's memory pool
/// (cudaMallocAsync): keep the pool's memory between calls (cudaMemPoolAttrReleaseThreshold).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "../codec/any.hpp"
#include "../core/error.hpp"
#include "detail/dispatch.hpp"
#include "detail/narrow.cuh"
#include "detail/onebit.cuh"
#include "detail/qsgd.cuh"
#include "detail/topk.cuh"
#include "wire_status.cuh"

namespace gradsync::cuda {
namespace detail {

/// Launches the kernels of a call on `stream`, faults recorded in `status`.
struct DeviceBackend {
  WireStatus* status;
  cudaStream_t stream;

  FaultSite site(const codec::WireHeader& expected, std::string_view name) { return status->site(expected, name); }
  template <class Format, Op op, bool Feedback>
  void narrow(const Buffers& b, const Frame& f) {
    launch_narrow<Format, op, Feedback>(b, f, stream);
  }
  template <unsigned Bits, Op op, bool Feedback>
  void qsgd(const QsgdWarp<Bits, op, Feedback>& q, const Frame& f) {
    launch_qsgd(q, f, stream);
  }
  template <Op op, bool Feedback>
  void onebit(const OneBitTeam<op, Feedback>& t, const Frame& f) {
    launch_onebit(t, f, stream);
  }
  /// Decode: validate, [fill,] scatter. Encode: the radix select and placement (a reduce's only
  /// once its validation passed: the verdict gates every kernel after it).
  template <Op op>
  void topk(const Buffers& b, std::size_t k, const Frame& f) {
    std::optional<StreamBuffer<unsigned long long>> verdict;
    if constexpr (decodes(op)) {
      verdict.emplace(1, stream);
      launch_topk_decode<op != Op::decode>(b.wire_in, b.acc, b.n, k, f, verdict->get(), stream);
    }
    if constexpr (encodes(op)) {
      Frame out;
      out.out = f.out;
      out.header = f.header;
      const TopKPrepare p = topk_prepare(op, b);
      launch_topk_encode(p, topk_tiles(op, b, p, k), out, verdict ? verdict->get() : nullptr, stream);
    }
  }
};

template <Op op, class C>
std::size_t run(const C& c, const Call& call, WireStatus* status, cudaStream_t stream) {
  DeviceBackend be{status, stream};
  return run<op>(c, call, be);
}
}  // namespace detail

/// Writes header + payload of device floats `in` into device bytes `out` (at least
/// codec.encoded_bytes(in.size())), as codec.encode does on the host; returns the wire size.
/// Asynchronous on `stream`.
template <codec::Codec C>
std::size_t encode(const C& codec, std::span<const float> in, std::span<std::byte> out,
                   const codec::EncodeContext& ctx = {}, cudaStream_t stream = nullptr) {
  return detail::run<detail::Op::encode>(codec, {.in = in, .wire_out = out, .ctx = &ctx}, nullptr, stream);
}

/// out = the decoded device wire form, asynchronously: a bad wire form leaves `out` untouched
/// and is reported by status.check() (sizes alone throw WireError at once).
template <codec::Codec C>
void decode(const C& codec, std::span<const std::byte> wire, std::span<float> out, WireStatus& status,
            cudaStream_t stream = nullptr) {
  detail::run<detail::Op::decode>(codec, {.acc = out, .wire_in = wire}, &status, stream);
}
/// acc += the decoded device wire form, asynchronously (as decode with a WireStatus).
template <codec::Codec C>
void decode_add(const C& codec, std::span<const std::byte> wire, std::span<float> acc, WireStatus& status,
                cudaStream_t stream = nullptr) {
  detail::run<detail::Op::decode_add>(codec, {.acc = acc, .wire_in = wire}, &status, stream);
}

/// The collectives' owner step in one kernel (top-k: its decode, then its encode): acc +=
/// decode(wire_in), acc /= mean_of (finish_mean; 1: a sum), wire_out = encode(acc, ctx) with the
/// residual in ctx as encode uses it, and for a lossy codec acc = decode(wire_out) (encode_final:
/// every rank ends with the same values). Returns the wire size. Asynchronous; a bad wire_in
/// leaves acc, wire_out and the residual untouched and is reported by status.check(). wire_in
/// and wire_out must not overlap.
template <codec::Codec C>
std::size_t decode_add_encode(const C& codec, std::span<const std::byte> wire_in, std::span<float> acc,
                              std::span<std::byte> wire_out, const codec::EncodeContext& ctx, WireStatus& status,
                              cudaStream_t stream = nullptr, std::uint32_t mean_of = 1) {
  if (mean_of == 0) throw UsageError("gradsync: decode_add_encode's mean_of is a rank count (1 for a sum), not 0");
  return detail::run<detail::Op::reduce>(
      codec, {.acc = acc, .wire_in = wire_in, .wire_out = wire_out, .ctx = &ctx, .divisor = static_cast<float>(mean_of)},
      &status, stream);
}

/// out = the decoded device wire form, validated as on the host: throws WireError before it
/// returns (it waits for `stream`), `out` untouched then.
template <codec::Codec C>
void decode(const C& codec, std::span<const std::byte> wire, std::span<float> out, cudaStream_t stream = nullptr) {
  WireStatus status(stream);
  decode(codec, wire, out, status, stream);
  status.check(stream);
}
/// acc += the decoded device wire form, validated as on the host (as decode without a status).
template <codec::Codec C>
void decode_add(const C& codec, std::span<const std::byte> wire, std::span<float> acc, cudaStream_t stream = nullptr) {
  WireStatus status(stream);
  decode_add(codec, wire, acc, status, stream);
  status.check(stream);
}

}  // namespace gradsync::cuda

#if defined(GRADSYNC_CUDA_CODECS_LIBRARY)  // instantiated once in gradsync::cuda_codecs (cuda/device_codecs.cu)
namespace gradsync::cuda {
extern template std::size_t encode(const codec::AnyCodec&, std::span<const float>, std::span<std::byte>,
                                   const codec::EncodeContext&, cudaStream_t);
extern template void decode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, WireStatus&, cudaStream_t);
extern template void decode_add(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, WireStatus&,
                                cudaStream_t);
extern template std::size_t decode_add_encode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>,
                                              std::span<std::byte>, const codec::EncodeContext&, WireStatus&,
                                              cudaStream_t, std::uint32_t);
extern template void decode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
extern template void decode_add(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
}  // namespace gradsync::cuda
#endif
