#pragma once
/// cuda::OnDevice<C>: codec C for gradients in GPU memory (codec/on_device.hpp over cuda::Device):
/// C's device kernels (cuda/codec.cuh) encode and decode units where they live, and the wire,
/// compressed, crosses to the host in one copy each way for the transport. Include from a .cu file
/// and link gradsync::cuda_codecs for AnyCodec.
///
/// \code
///   using Sync = gradsync::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                                       gs::cuda::OnDevice<gs::codec::AnyCodec>, gs::collective::AnyCollective>;
///   Sync sync{mpi, layout, {}, {.codec = {gs::codec::AnyCodec::parse("qsgd8")}}};
///   cudaStreamSynchronize(compute);                             // the gradient is written
///   sync.gradient_ready(layer, std::span<float>(d_grad, n));    // stays on the GPU
/// \endcode
#include <cuda_runtime.h>

#include <thrust/execution_policy.h>

#include <cstddef>
#include <span>

#include "../codec/on_device.hpp"
#include "codec.cuh"

namespace gradsync::cuda {

namespace detail {
/// *first = the least i with p(i) (a kernel functor: namespace scope, nvcc's stubs name it).
template <class P>
struct FirstWhere {
  P p;
  unsigned long long* first;
  __device__ void operator()(std::size_t i) const {
    if (p(i)) atomicMin(first, static_cast<unsigned long long>(i));
  }
};
}  // namespace detail

/// The CUDA space of codec::OnDevice: each step runs on the calling thread's default stream
/// (cudaStreamPerThread: executors and the parameter server's thread never wait on each other) on
/// GPU `device`, and is complete when it returns.
struct Device {
  int device = 0;  ///< the GPU of the units (and of the scratch memory)

  bool holds(const void* p) const {
    cudaPointerAttributes a{};
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // not a CUDA pointer (or no driver): host memory, and no sticky error
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  /// The calling thread's scratch, grown to `bytes` (kept until the thread ends).
  std::span<std::byte> scratch(std::size_t bytes) const {
    thread_local Scratch s;
    use();
    return s.get(bytes);
  }
  void to_host(std::span<std::byte> host, std::span<const std::byte> device_bytes) const {
    use();
    check(cudaMemcpyAsync(host.data(), device_bytes.data(), host.size(), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (wire to the host)");
    synchronize();
  }
  /// From pageable memory the copy is staged before the call returns; the next step orders after it.
  void to_device(std::span<std::byte> device_bytes, std::span<const std::byte> host) const {
    use();
    check(cudaMemcpyAsync(device_bytes.data(), host.data(), host.size(), cudaMemcpyHostToDevice, stream()),
          "cudaMemcpyAsync (wire to the device)");
  }
  template <class C>
  std::size_t encode(const C& c, std::span<const float> in, std::span<std::byte> out,
                     const codec::EncodeContext& ctx) const {
    use();
    return cuda::encode(c, in, out, ctx, stream());  // to_host, next, waits for it
  }
  template <class C>
  void decode(const C& c, std::span<const std::byte> wire, std::span<float> out, bool add) const {
    use();
    if (add) cuda::decode_add(c, wire, out, stream());
    else cuda::decode(c, wire, out, stream());
    synchronize();
  }
  template <class F>
  void for_each(std::size_t n, const F& f) const {
    launch(n, f);
    synchronize();
  }
  /// One pass of atomicMin into the scratch: thrust::find_if would allocate (and cudaFree
  /// synchronizes the whole device, the trainer's compute stream included).
  template <class P>
  std::size_t find_if(std::size_t n, const P& p) const {
    unsigned long long first = n;
    const auto bytes = std::as_writable_bytes(std::span(&first, 1));
    const std::span<std::byte> on_device = scratch(bytes.size());
    to_device(on_device, bytes);
    launch(n, detail::FirstWhere<P>{p, reinterpret_cast<unsigned long long*>(on_device.data())});
    to_host(bytes, on_device);  // after the kernel, on the same stream
    return static_cast<std::size_t>(first);
  }

 private:
  template <class F>
  void launch(std::size_t n, const F& f) const {
    use();
    codec::detail::for_each_index(thrust::cuda::par_nosync.on(stream()), n, f);
    check(cudaGetLastError(), "kernel launch");
  }
  static cudaStream_t stream() { return cudaStreamPerThread; }
  static void synchronize() { check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"); }
  void use() const { check(cudaSetDevice(device), "cudaSetDevice"); }

  class Scratch {
   public:
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() { cudaFree(p_); }  // at thread exit; an error there (driver gone) has no one to tell
    std::span<std::byte> get(std::size_t bytes) {
      if (bytes > size_) {
        check(cudaFree(p_), "cudaFree");
        p_ = nullptr;
        size_ = 0;
        check(cudaMalloc(&p_, bytes), "cudaMalloc (codec scratch)");
        size_ = bytes;
      }
      return {static_cast<std::byte*>(p_), bytes};
    }

   private:
    void* p_ = nullptr;
    std::size_t size_ = 0;
  };
};

template <codec::Codec C>
using OnDevice = codec::OnDevice<C, Device>;

}  // namespace gradsync::cuda
