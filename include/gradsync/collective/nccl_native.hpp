#pragma once
/// NcclNative: hands the unit to NCCL's all-reduce (ncclAllReduce, sum or average of floats) on
/// the rank's stream — the vendor baseline on GPUs. Only for lossless summable codecs (fp32), as
/// MpiNative; only over transport::Nccl. Job::data may be device memory (a CUDA trainer's
/// gradients: reduced in place) or host memory (staged through the device).
///
/// \code
///   gradsync::transport::Nccl nccl(bootstrap, device);
///   gradsync::Synchronizer<..., gradsync::codec::Identity, gradsync::collective::NcclNative> sync{nccl, layout};
///   // or AnyCollective::parse("nccl") in a build linked to gradsync::nccl
/// \endcode
///
/// Units are issued in schedule order (issue_order.hpp), one stream per rank, and each waits on
/// its own event with the transport's timeout. Use one NcclNative object per Synchronizer.
#include <cuda_runtime.h>
#include <nccl.h>

#include <limits>
#include <string>

#include "../transport/nccl.hpp"
#include "concept.hpp"
#include "issue_order.hpp"

namespace gradsync::collective {

struct NcclNative {
  std::string_view name() const { return "nccl"; }
  /// The vendor library adds fp32 values; units may live in GPU memory.
  static constexpr Traits traits() { return {.needs_lossless_codec = true, .device_memory = true}; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace&) const {
    check_accepts(*this, codec);
    auto* nccl = t.native<transport::Nccl>();
    if (!nccl)
      throw UsageError("gradsync: collective 'nccl' runs NCCL's own all-reduce and needs transport::Nccl, not " +
                       t.describe() + "; use collective 'ring' with this transport");
    using transport::detail::cuda_check;
    const std::size_t n = job.data.size();
    cuda_check(cudaSetDevice(nccl->device()), "cudaSetDevice");
    const bool on_device = transport::detail::is_device_memory(job.data.data());
    const cudaStream_t s = nccl->stream();
    float* data = job.data.data();
    cudaEvent_t done;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    try {
      order_.run(job, t, "nccl", [&] {
        if (!on_device) {
          cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&data), job.data.size_bytes() + 1, s), "cudaMallocAsync");
          cuda_check(cudaMemcpyAsync(data, job.data.data(), job.data.size_bytes(), cudaMemcpyHostToDevice, s),
                     "cudaMemcpyAsync");
        }
        transport::detail::nccl_check(ncclAllReduce(data, data, n, ncclFloat, job.average ? ncclAvg : ncclSum,
                                                    nccl->comm(), s),
                                      t.describe() + ": ncclAllReduce");
        cuda_check(cudaEventRecord(done, s), "cudaEventRecord");
      });
      nccl->wait(done, "ncclAllReduce of unit " + std::to_string(job.tag));
      if (!on_device) {
        cuda_check(cudaMemcpy(job.data.data(), data, job.data.size_bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
        cuda_check(cudaFreeAsync(data, s), "cudaFreeAsync");
      }
    } catch (...) {
      cudaEventDestroy(done);
      throw;
    }
    cudaEventDestroy(done);
    // What a ring all-reduce sends; NCCL does not say what its algorithm sent.
    return detail::ring_bytes(job.data.size_bytes(), t.size());
  }

 private:
  detail::IssueOrder order_;
};
GRADSYNC_CHECK_COLLECTIVE(NcclNative);

}  // namespace gradsync::collective
