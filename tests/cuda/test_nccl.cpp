// transport::Nccl + collectives 'nccl' and 'nccl-hierarchical' on every visible GPU, one
// in-process rank per GPU (bootstrapped over InProcess), against the reference sum. Needs a GPU
// (GRADSYNC_GPU_TESTS).
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include <gradsync/codec/any.hpp>
#include <gradsync/collective/any.hpp>
#include <gradsync/transport/in_process.hpp>
#include <gradsync/transport/nccl.hpp>

using namespace gradsync;

namespace {
int gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}
float value(int rank, std::size_t i) { return static_cast<float>(rank + 1) * 0.25f + static_cast<float>(i % 1000) * 1e-3f; }
}  // namespace

TEST_CASE("NcclNative and NcclHierarchical sum every GPU's unit, on device and from host memory", "[gpu][nccl]") {
  const std::string name = GENERATE(as<std::string>{}, "nccl", "nccl-hierarchical:1", "nccl-hierarchical:2");
  CAPTURE(name);
  const int ranks = gpus();
  REQUIRE(ranks > 0);
  const std::size_t n = 1'000'003;
  transport::InProcessGroup group(ranks);
  std::vector<std::vector<float>> device_result(ranks), host_result(ranks);
  std::vector<std::string> errors(ranks);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        try {
          transport::Nccl nccl(group.rank(r), r);
          const auto collective = collective::AnyCollective::parse(name);
          collective::Workspace ws;
          std::vector<float> h(n);
          for (std::size_t i = 0; i < n; ++i) h[i] = value(r, i);
          float* d = nullptr;
          transport::detail::cuda_check(cudaMalloc(&d, n * sizeof(float)), "cudaMalloc");
          transport::detail::cuda_check(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
          collective::Job on_device{.data = {d, n}, .tag = 1, .average = false, .sequence = 0};
          collective.run(nccl, codec::AnyCodec::parse("fp32"), on_device, ws);
          device_result[r].resize(n);
          transport::detail::cuda_check(cudaMemcpy(device_result[r].data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
          cudaFree(d);
          collective::Job from_host{.data = h, .tag = 2, .average = true, .sequence = 1};
          collective.run(nccl, codec::Identity{}, from_host, ws);
          host_result[r] = h;
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
  }
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    REQUIRE(errors[r].empty());
    double worst_sum = 0, worst_mean = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int q = 0; q < ranks; ++q) sum += value(q, i);
      worst_sum = std::max(worst_sum, std::abs(device_result[r][i] - sum) / sum);
      worst_mean = std::max(worst_mean, std::abs(host_result[r][i] - sum / ranks) / (sum / ranks));
    }
    CHECK(worst_sum < 1e-6 * ranks);
    CHECK(worst_mean < 1e-6 * ranks);
    CHECK(device_result[r] == device_result[0]);  // identical on every rank
    CHECK(host_result[r] == host_result[0]);
  }
}
