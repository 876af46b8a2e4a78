// 08: gradients that live in GPU memory, aggregated by NCCL without a copy to the host. One
// in-process rank per visible GPU; transport::Nccl bootstraps its communicator over the
// in-process transport (over transport::Mpi in a multi-node job) and the NcclNative collective
// all-reduces each unit in place on the device.
//
// What device memory needs (the Synchronizer refuses the rest by name): a collective that reads
// device memory (nccl, nccl-hierarchical), whole or sliced layers (not fused), a codec without a
// residual, Options::check_finite off, and the kernels that wrote the gradient finished before
// gradient_ready (gradsync's NCCL streams do not wait for yours).
//
// Built whenever CUDA and NCCL are found (target gradsync::nccl); run by ctest only with
// GRADSYNC_GPU_TESTS=ON, since it needs a GPU. Without one it says so and fails.
#include <gradsync/gradsync.hpp>
#include <gradsync/transport/nccl.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;

void check_cuda(cudaError_t e, const char* what) {
  example::check(e == cudaSuccess, std::string(what) + ": " + cudaGetErrorString(e));
}

int main() {
  return example::run([] {
    int gpus = 0;
    check_cuda(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
    example::check(gpus > 0, "this example needs a GPU");
    const gs::ModelLayout layout{{"conv.weight", 1'000'000}, {"fc.weight", 250'000}, {"fc.bias", 1000}};
    using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Identity,
                                  gs::collective::NcclNative>;
    std::vector<int> wrong(gpus, -1);
    example::on_ranks(gpus, [&](int rank, gs::transport::Transport& bootstrap) {
      check_cuda(cudaSetDevice(rank), "cudaSetDevice");
      gs::transport::Nccl nccl(bootstrap, rank);
      Sync sync{nccl, layout, {.check_finite = false}, {.slicing = {.max_elements = 1u << 20}}};
      std::vector<float*> grad(layout.num_layers());
      for (std::size_t l = 0; l < grad.size(); ++l) {
        const std::vector<float> host(layout.layer(l).elements, float(rank + 1));
        check_cuda(cudaMalloc(&grad[l], host.size() * sizeof(float)), "cudaMalloc");
        check_cuda(cudaMemcpy(grad[l], host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      // (a real backward pass: launch the layer's kernels, synchronize their stream, then hand over)
      for (std::size_t l = grad.size(); l-- > 0;) sync.gradient_ready(l, {grad[l], layout.layer(l).elements});
      sync.finish_iteration();
      sync.wait_all();
      int bad = 0;  // the mean of 1..gpus
      for (std::size_t l = 0; l < grad.size(); ++l) {
        std::vector<float> host(layout.layer(l).elements);
        check_cuda(cudaMemcpy(host.data(), grad[l], host.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (float x : host) bad += x != float(gpus + 1) / 2;
        check_cuda(cudaFree(grad[l]), "cudaFree");
      }
      wrong[rank] = bad;
    });
    for (int bad : wrong) example::check(bad == 0, "every GPU got the mean");
    std::printf("%d GPU(s): every rank got the mean on the device\n", gpus);
  });
}
