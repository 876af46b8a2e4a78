// cuda::OnDevice through the whole Synchronizer on a GPU (in-process ranks, gradients in device
// memory): the host codec's aggregates bit for bit, identical on every rank, the NaN check on the
// device, and the refusals. The same checks on the host twin: tests/synchronizer/test_on_device.cpp.
// Needs a GPU (registered by GRADSYNC_GPU_TESTS; benchmarks/gpu/two_ranks.sh runs it).
#include <catch2/catch.hpp>

#include <gradsync/cuda/on_device.cuh>
#include <gradsync/gradsync.hpp>

#include "support/device_runs.hpp"

// Names, not `using namespace gradsync`: nvcc's generated stub names libcu++'s ::cuda unqualified,
// which gradsync::cuda would make ambiguous.
using gradsync::AnySynchronizer;
using gradsync::ModelLayout;
using gradsync::PolicyNames;
using gradsync::UsageError;
namespace transport = gradsync::transport;
using testing::Aggregates;

namespace {

using DeviceSynchronizer = testing::DeviceSynchronizer<gradsync::cuda::Device>;
const auto on_device = testing::on_device<gradsync::cuda::Device>;

/// A gradient in device memory (support/reference.hpp's train_with).
class DeviceGradient {
 public:
  explicit DeviceGradient(std::size_t n) : n_(n) {
    gradsync::cuda::check(cudaMalloc(&p_, n * sizeof(float) + 1), "cudaMalloc");
  }
  DeviceGradient(const DeviceGradient&) = delete;
  DeviceGradient& operator=(const DeviceGradient&) = delete;
  ~DeviceGradient() { cudaFree(p_); }
  std::span<float> span() { return {p_, n_}; }
  void upload(std::span<const float> values) {
    gradsync::cuda::check(cudaMemcpy(p_, values.data(), values.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    gradsync::cuda::check(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
  }

 private:
  float* p_ = nullptr;
  std::size_t n_;
};

const auto run = testing::run_policies<gradsync::cuda::Device, DeviceGradient>;

}  // namespace

TEST_CASE("cuda::OnDevice through the Synchronizer gives the host codec's aggregates on every rank", "[gpu]") {
  struct Case {
    const char* collective;
    int ranks;
  };
  // 2 ranks on the ring: the host's raw-fp32 ring sums chunks in the owners' order there too
  const auto [collective, ranks] = GENERATE(Case{"ring", 2}, Case{"ps", 3}, Case{"reduce-broadcast", 3});
  const std::string codec = GENERATE("fp32", "fp16:bypass=0", "qsgd8:bypass=0", "qsgd8");
  CAPTURE(collective, ranks, codec);
  const PolicyNames names{"fixed:1000", "forward", codec, collective};
  const auto host = run(names, ranks, false);
  const auto device = run(names, ranks, true);
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    REQUIRE(testing::bit_identical(host[r], device[r]));
    REQUIRE(testing::bit_identical(device[0], device[r]));
  }
}

TEST_CASE("cuda::OnDevice: the NaN check runs on the device; what reads units on the host is refused", "[gpu]") {
  transport::InProcessGroup g(1);
  const ModelLayout layout{{"w", 100}};
  DeviceGradient w(100);
  std::vector<float> v(100, 1.0f);
  v[37] = std::numeric_limits<float>::quiet_NaN();
  w.upload(v);
  auto refusal = [&](const PolicyNames& names) {
    DeviceSynchronizer sync(g.rank(0), layout, {}, on_device(AnySynchronizer::parse(names)));
    try {  // a refusal throws at once; the NaN when its unit starts, at the next wait
      sync.gradient_ready(0, w.span());
      sync.finish_iteration();
      sync.wait_all();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(refusal({"whole", "forward", "qsgd8", "ps"}), Catch::Contains("(element 37 is nan)"));
  CHECK_THAT(refusal({"whole", "forward", "onebit", "ring"}), Catch::Contains("error-feedback residual on the host"));
}
