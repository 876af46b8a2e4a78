#pragma once
/// WireStatus: where asynchronous device decodes report a bad wire form. A decode validates the
/// received header on the device (and top-k its indices) and, when they are wrong, leaves its
/// output untouched and records the fault here instead of throwing; check() reports it.
///
/// \code
///   gradsync::cuda::WireStatus status(stream);
///   for (auto& piece : pieces) gradsync::cuda::decode_add(codec, piece.wire, piece.acc, status, stream);
///   status.check(stream);   // waits for the stream; throws the host decoder's WireError for the
///                           // first bad wire form since the last check
/// \endcode
///
/// Sizes alone (a wire shorter than its header, or not the expected size) throw at the call.
/// Its record is allocated on the constructor's stream: decodes on other streams must be ordered
/// after that (or the stream synchronized), and check() sees the decodes of the stream it waits
/// for (synchronize the others first). The status must outlive the decodes that use it.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "detail/launch.cuh"

namespace gradsync::cuda {

class WireStatus {
 public:
  /// Allocates the record from `stream`'s memory pool (stream-ordered).
  explicit WireStatus(cudaStream_t stream = nullptr) : stream_(stream) {
    gradsync::cuda::check(cudaMallocAsync(reinterpret_cast<void**>(&fault_), sizeof(detail::Fault), stream), "cudaMallocAsync");
    gradsync::cuda::check(cudaMemsetAsync(fault_, 0, sizeof(detail::Fault), stream), "cudaMemsetAsync");
  }
  WireStatus(const WireStatus&) = delete;
  WireStatus& operator=(const WireStatus&) = delete;
  ~WireStatus() { cudaFreeAsync(fault_, stream_); }

  /// Waits for `stream`, then throws the first fault recorded since the last check (the WireError
  /// the host codec throws for the same bytes) and clears it; returns when there is none.
  void check(cudaStream_t stream = nullptr) {
    detail::Fault f;
    gradsync::cuda::check(cudaMemcpyAsync(&f, fault_, sizeof f, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (status)");
    gradsync::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (f.call == 0) return;
    gradsync::cuda::check(cudaMemsetAsync(fault_, 0, sizeof f, stream), "cudaMemsetAsync (status)");
    gradsync::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    detail::raise(f);
  }

  /// The site of the next decode, expecting `expected` (for the codec's kernels).
  detail::FaultSite site(const codec::WireHeader& expected, std::string_view codec_name) {
    std::uint32_t call = ++calls_;
    if (call == 0) call = ++calls_;  // 0 means "no fault"
    return detail::make_site(fault_, call, expected, codec_name);
  }

 private:
  cudaStream_t stream_;
  detail::Fault* fault_ = nullptr;
  std::atomic<std::uint32_t> calls_{0};
};

}  // namespace gradsync::cuda
