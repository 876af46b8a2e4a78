#pragma once
/// NcclHierarchical: Hierarchical (ImageNet in 4 minutes, section 4.3) with NCCL inside each group
/// of k consecutive ranks (a node's GPUs): the group sums the unit into its first rank with
/// ncclReduce (NVLink / PCIe, fp32), the group leaders run Ring with the unit's codec over the
/// bootstrap transport (the network between nodes, where compression pays), and ncclBroadcast
/// hands the result back inside the group. Only over transport::Nccl; any codec.
///
/// \code
///   gradsync::transport::Nccl nccl(mpi, local_rank);
///   using Sync = gradsync::Synchronizer<..., gradsync::codec::Qsgd<8>, gradsync::collective::NcclHierarchical>;
///   Sync sync{nccl, layout, {}, {.collective = gradsync::collective::NcclHierarchical(gpus_per_node)}};
///   // or AnyCollective::parse("nccl-hierarchical:8")
/// \endcode
///
/// Job::data may be device memory (reduced in place) or host memory (staged through the device).
/// Reductions and broadcasts run on communicators and streams of their own (Nccl::group) and are
/// issued in one order on every rank: reduce(u0), broadcast(u0), reduce(u1), ... in schedule
/// order. NCCL kernels of communicators on one device may wait on each other, so an order that
/// differed between ranks (a leader's broadcast waits for its ring, a member's does not) could
/// deadlock; a unit's reduction therefore waits until the previous unit's broadcast is issued.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "../transport/nccl.hpp"
#include "concept.hpp"
#include "hierarchical.hpp"
#include "issue_order.hpp"
#include "ring.hpp"

namespace gradsync::collective {

struct NcclHierarchical {
  /// \param group ranks per group, as Hierarchical::group (0: automatic); usually a node's GPUs
  explicit NcclHierarchical(int group = 0) : group(group) {}
  int group;

  std::string_view name() const { return "nccl-hierarchical"; }
  /// Units may live in GPU memory.
  static constexpr Traits traits() { return {.device_memory = true}; }
  std::string describe() const {
    return group > 0 ? "nccl-hierarchical:" + std::to_string(group) : "nccl-hierarchical";
  }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    auto* nccl = t.native<transport::Nccl>();
    if (!nccl)
      throw UsageError("gradsync: collective 'nccl-hierarchical' reduces inside groups with NCCL and needs "
                       "transport::Nccl, not " + t.describe() + "; use collective 'hierarchical' with this transport");
    using transport::detail::cuda_check;
    using transport::detail::nccl_check;
    const int n = t.size(), k = Hierarchical{.group = group}.group_size(n);
    const bool leader = t.rank() % k == 0;
    const std::size_t count = job.data.size(), bytes = job.data.size_bytes();
    cuda_check(cudaSetDevice(nccl->device()), "cudaSetDevice");
    transport::Nccl::Group& g = nccl->group(k);
    const bool on_device = transport::detail::is_device_memory(job.data.data());
    float* data = job.data.data();
    std::vector<float> host;  // the leader's copy for the ring, when the unit lives on the device
    std::span<float> ring_data = job.data;
    cudaEvent_t done;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    std::size_t sent = 0;
    try {
      if (!on_device) {
        cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&data), bytes + 1, g.reduce.stream), "cudaMallocAsync");
        cuda_check(cudaMemcpyAsync(data, job.data.data(), bytes, cudaMemcpyHostToDevice, g.reduce.stream), "cudaMemcpyAsync");
      }
      const auto slot = [&](std::uint64_t phase) {
        return job.sequence ? std::optional<std::uint64_t>(2 * *job.sequence + phase) : std::nullopt;
      };
      order_.run(job, slot(0), t, "nccl-hierarchical", [&] {
        nccl_check(ncclReduce(data, data, count, ncclFloat, ncclSum, 0, g.reduce.comm, g.reduce.stream),
                   t.describe() + ": ncclReduce");
        cuda_check(cudaEventRecord(done, g.reduce.stream), "cudaEventRecord");
      });
      nccl->wait(done, "ncclReduce of unit " + std::to_string(job.tag), g.reduce.comm);
      if (leader) {  // the group's sum: ring among the leaders on the host, then back to the device
        if (on_device) {
          host.resize(count);
          ring_data = host;
        }
        cuda_check(cudaMemcpy(ring_data.data(), data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        if (n > k) {
          detail::Leaders leaders(t, k);
          Job sum{ring_data, job.tag, job.ctx, false, job.sequence};
          sent = Ring{}.run(leaders, codec, sum, ws);
        }
        detail::finish_mean(ring_data, job.average, n);
        cuda_check(cudaMemcpyAsync(data, ring_data.data(), bytes, cudaMemcpyHostToDevice, g.broadcast.stream),
                   "cudaMemcpyAsync");
      }
      order_.run(job, slot(1), t, "nccl-hierarchical", [&] {
        nccl_check(ncclBroadcast(data, data, count, ncclFloat, 0, g.broadcast.comm, g.broadcast.stream),
                   t.describe() + ": ncclBroadcast");
        cuda_check(cudaEventRecord(done, g.broadcast.stream), "cudaEventRecord");
      });
      nccl->wait(done, "ncclBroadcast of unit " + std::to_string(job.tag), g.broadcast.comm);
      if (!on_device) {
        cuda_check(cudaMemcpy(job.data.data(), data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        cuda_check(cudaFreeAsync(data, g.broadcast.stream), "cudaFreeAsync");
      }
    } catch (...) {
      cudaEventDestroy(done);
      throw;
    }
    cudaEventDestroy(done);
    // Inside the group NCCL moves fp32 (what a ring would send there); between groups, the ring.
    return sent + detail::ring_bytes(bytes, k);
  }

 private:
  detail::IssueOrder order_;  // every NCCL call of this collective: one thread at a time, one order
};
GRADSYNC_CHECK_COLLECTIVE(NcclHierarchical);

}  // namespace gradsync::collective
