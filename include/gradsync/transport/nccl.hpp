#pragma once
/// Nccl: one rank's NCCL communicator on one GPU, bootstrapped over any other transport.
///
/// \code
///   // one process per GPU, under mpirun
///   gradsync::transport::MpiSession mpi(argc, argv);
///   gradsync::transport::Mpi host(MPI_COMM_WORLD);
///   gradsync::transport::Nccl nccl(host, /*device=*/local_rank);
///   // one process, all GPUs: one thread per GPU over an InProcessGroup
///   gradsync::transport::Nccl nccl(group.rank(r), /*device=*/r);
///   gradsync::Synchronizer<..., gradsync::codec::Identity, gradsync::collective::NcclNative> sync{nccl, layout};
/// \endcode
///
/// NCCL has no tagged point-to-point messages, so the Transport interface (control traffic, the
/// handshake, the codec collectives' host buffers) is the bootstrap transport's; NCCL carries
/// what collective::NcclNative hands it, on this rank's stream. Construction is collective: rank
/// 0 makes the ncclUniqueId and sends it to every rank over the bootstrap transport, then every
/// rank joins with ncclCommInitRank on its device. Build with the gradsync::nccl target.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "tags.hpp"
#include "transport.hpp"

namespace gradsync::transport {

namespace detail {
inline void nccl_check(ncclResult_t rc, const std::string& what) {
  if (rc != ncclSuccess) throw PeerError("gradsync: " + what + " failed: " + ncclGetErrorString(rc));
}
inline void cuda_check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) throw std::runtime_error("gradsync: " + what + " failed: " + cudaGetErrorString(rc));
}
/// Whether a unit lives on a GPU (a CUDA trainer's gradients) rather than in host memory.
inline bool is_device_memory(const void* p) {
  cudaPointerAttributes a{};
  return p && cudaPointerGetAttributes(&a, p) == cudaSuccess &&
         (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
}
}  // namespace detail

class Nccl final : public Transport {
 public:
  /// \param bootstrap the same ranks over a host transport (Mpi, an InProcess rank, ...); it
  ///                  must outlive this object and carries every point-to-point message
  /// \param device    the CUDA device of this rank
  Nccl(Transport& bootstrap, int device) : host_(bootstrap), device_(device) {
    int devices = 0;
    detail::cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount (no GPU or no driver?)");
    if (device < 0 || device >= devices)
      throw UsageError("gradsync: transport::Nccl device " + std::to_string(device) + " does not exist (" +
                       std::to_string(devices) + " visible); pass a local rank below that");
    ncclUniqueId id;
    const auto bytes = std::as_writable_bytes(std::span(&id, 1));
    if (host_.rank() == 0) {
      detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      for (int r = 1; r < host_.size(); ++r) host_.send(r, nccl_bootstrap_tag, bytes);
    } else if (host_.recv(0, nccl_bootstrap_tag, bytes) != bytes.size()) {
      throw WireError("gradsync: " + describe() + ": the ncclUniqueId from rank 0 has the wrong size");
    }
    detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    detail::nccl_check(ncclCommInitRank(&comm_, host_.size(), id, host_.rank()), describe() + ": ncclCommInitRank");
    const auto rc = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (rc != cudaSuccess) ncclCommDestroy(comm_);
    detail::cuda_check(rc, "cudaStreamCreateWithFlags");
  }
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;
  ~Nccl() override {
    cudaSetDevice(device_);
    for (auto& [k, g] : groups_)
      for (Lane* lane : {&g.reduce, &g.broadcast}) {
        cudaStreamSynchronize(lane->stream);
        if (lane->comm) ncclCommDestroy(lane->comm);
        cudaStreamDestroy(lane->stream);
      }
    cudaStreamSynchronize(stream_);
    if (comm_) ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string describe() const override {
    return "nccl rank " + std::to_string(rank()) + " of " + std::to_string(size()) + " (GPU " + std::to_string(device_) + ")";
  }
  std::chrono::milliseconds timeout() const override { return host_.timeout(); }
  bool device_memory(const void* p) const override { return detail::is_device_memory(p); }
  void send(int dst, Tag tag, std::span<const std::byte> data) override { host_.send(dst, tag, data); }
  SendId send_async(int dst, Tag tag, std::span<const std::byte> data) override {
    return host_.send_async(dst, tag, data);
  }
  void wait_sent(SendId id) override { host_.wait_sent(id); }
  bool test_sent(SendId id) override { return host_.test_sent(id); }
  bool wait_sent_for(SendId id, std::chrono::milliseconds wait) override { return host_.wait_sent_for(id, wait); }
  std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out, std::chrono::milliseconds wait) override {
    return host_.recv_for(src, tag, out, wait);
  }
  std::optional<std::size_t> try_recv(int src, Tag tag, std::span<std::byte> out) override {
    return host_.try_recv(src, tag, out);
  }

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

  /// A communicator with its own stream. NCCL runs a communicator's collectives in the order
  /// they were issued, the same on every rank; separate lanes keep separate orders.
  struct Lane {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  /// This rank's group of k consecutive ranks (collective::NcclHierarchical): one lane for the
  /// reductions into the group's first rank, one for the broadcasts from it. Split from the
  /// world communicator on first use, which is collective: every rank asks for the same k.
  struct Group {
    Lane reduce, broadcast;
  };
  Group& group(int k) {
    std::lock_guard lock(groups_mutex_);
    auto [it, fresh] = groups_.try_emplace(k);
    if (!fresh) return it->second;
    try {
      detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
      for (Lane* lane : {&it->second.reduce, &it->second.broadcast}) {
        detail::nccl_check(ncclCommSplit(comm_, rank() / k, rank(), &lane->comm, nullptr), describe() + ": ncclCommSplit");
        detail::cuda_check(cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      }
    } catch (...) {
      for (Lane* lane : {&it->second.reduce, &it->second.broadcast}) {
        if (lane->comm) ncclCommDestroy(lane->comm);
        if (lane->stream) cudaStreamDestroy(lane->stream);
      }
      groups_.erase(it);
      throw;
    }
    return it->second;
  }

  /// Waits for `done` (recorded on a stream after NCCL work on `comm`, the world's by default),
  /// polling so that a peer that never joins becomes a PeerError after timeout() instead of a
  /// hang: the communicator is then aborted (it cannot be used again).
  void wait(cudaEvent_t done, const std::string& what) { wait(done, what, comm_); }
  void wait(cudaEvent_t done, const std::string& what, ncclComm_t& comm) {
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    auto pause = std::chrono::microseconds(5);
    for (;;) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) detail::cuda_check(q, describe() + ": " + what);
      ncclResult_t async = ncclSuccess;
      detail::nccl_check(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
      detail::nccl_check(async, describe() + ": " + what);
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        comm = nullptr;
        throw PeerError("gradsync: " + describe() + " waited " + std::to_string(timeout().count()) + " ms for " + what +
                        ": a peer died or stopped issuing units; the NCCL communicator was aborted");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

 private:
  Transport& host_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex groups_mutex_;
  std::map<int, Group> groups_;  // by k; node-stable references
};

}  // namespace gradsync::transport
