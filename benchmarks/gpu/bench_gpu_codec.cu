// Device encode/decode throughput of every codec on a 64 MiB fp32 unit in GPU memory, next to a
// cudaMemcpy device-to-device of the same buffer, in the same run. Timed with CUDA events
// (manual time); bytes_per_second counts the fp32 input for every benchmark, so
// ratio = codec / memcpy. Needs a GPU (benchmarks/gpu/run.sh).
//
//   ./bench_gpu_codec --benchmark_filter='memcpy|qsgd8'
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include <gradsync/cuda/codec.cuh>

namespace {
using gradsync::cuda::check;
constexpr std::size_t n = (64u << 20) / sizeof(float);

struct Buffers {
  float* grad;
  float* out;
  float* residual;
  std::byte* wire;
  cudaEvent_t start, stop;
  Buffers() {
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.0f, 1e-3f);
    std::vector<float> g(n);
    for (auto& x : g) x = d(gen);
    check(cudaMalloc(&grad, n * 4), "cudaMalloc");
    check(cudaMalloc(&out, n * 4), "cudaMalloc");
    check(cudaMalloc(&residual, n * 4), "cudaMalloc");
    check(cudaMalloc(&wire, n * 4 + 64), "cudaMalloc");
    check(cudaMemcpy(grad, g.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemset(residual, 0, n * 4), "cudaMemset");
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
};
Buffers& buffers() {
  static Buffers b;
  return b;
}

/// Runs `body` per iteration between two events; the elapsed GPU time is the iteration time.
template <class F>
void timed(benchmark::State& state, F&& body) {
  auto& b = buffers();
  for (auto _ : state) {
    cudaEventRecord(b.start);
    body();
    cudaEventRecord(b.stop);
    cudaEventSynchronize(b.stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, b.start, b.stop);
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n * 4));
}

void bench_memcpy(benchmark::State& state) {
  auto& b = buffers();
  timed(state, [&] { check(cudaMemcpyAsync(b.out, b.grad, n * 4, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
}

void bench_encode(benchmark::State& state, const char* name) {
  auto& b = buffers();
  const auto c = gradsync::codec::AnyCodec::parse(name);
  const std::span<float> residual(b.residual, c.needs_residual() ? n : 0);  // error feedback on, as in use
  std::uint64_t it = 0;
  timed(state, [&] {
    gradsync::cuda::encode(c, std::span<const float>(b.grad, n), std::span(b.wire, c.encoded_bytes(n)),
                           {.seed = 1, .iteration = it++, .residual = residual});
  });
  state.counters["wire_MiB"] = double(c.encoded_bytes(n)) / (1 << 20);
}

void bench_decode_add(benchmark::State& state, const char* name) {
  auto& b = buffers();
  const auto c = gradsync::codec::AnyCodec::parse(name);
  const std::size_t bytes = gradsync::cuda::encode(c, std::span<const float>(b.grad, n), std::span(b.wire, c.encoded_bytes(n)), {});
  timed(state, [&] { gradsync::cuda::decode_add(c, std::span<const std::byte>(b.wire, bytes), std::span(b.out, n)); });
}

const char* const codecs[] = {"fp32", "fp16", "bf16", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "qsgd8:norm=l2", "onebit", "topk:0.01"};

const int registered = [] {
  benchmark::RegisterBenchmark("memcpy", bench_memcpy)->UseManualTime()->Unit(benchmark::kMicrosecond);
  for (const char* c : codecs) {
    benchmark::RegisterBenchmark((std::string("encode/") + c).c_str(), bench_encode, c)->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("decode_add/") + c).c_str(), bench_decode_add, c)->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();
}  // namespace

BENCHMARK_MAIN();
