// Device codec throughput on a 64 MiB fp32 unit (16 Mi elements) next to cudaMemcpy D2D of the
// same unit, in the same run: encode, decode_add (asynchronous, with a WireStatus) and
// decode_add_encode (the collectives' owner step) of every codec with a speed goal, with the
// residual on where the codec keeps one (onebit, topk, ef+), as in training.
//
// Ratios: bytes_per_second counts the unit's fp32 input (64 MiB) for every benchmark, memcpy
// included, so codec / memcpy = memcpy_time / codec_time for the same unit (run.sh's table).
// L2: an H200's L2 (60 MB) would hold most of one 64 MiB unit, so a benchmark cycles through 4
// independent sets of buffers (input, accumulator, residual, wire forms: ~1.3 GiB in all), and one
// timed iteration runs the call once on each set, back to back on one stream between two CUDA
// events (the time per call is a quarter of it): no call finds its data in L2 from the call
// before, and the host's launch work overlaps the device's as in a real pipeline. memcpy cycles
// the same way. Buffers come from cudaMalloc (256-byte aligned: the 16-byte paths).
// Self-checking: the first time a codec runs, its device bytes, residual and decode_add are
// compared with the host codec's on set 0; a mismatch (or a WireStatus fault) fails its
// benchmarks, and the program exits 1. 0.2 s of device time per benchmark (34 of them): about a
// minute with run.sh's 5 repetitions. Needs a GPU (benchmarks/gpu/run.sh).
//
//   ./bench_gpu_codec --benchmark_filter='memcpy|qsgd8'
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gradsync/cuda/codec.cuh>

namespace {
using gradsync::cuda::check;
namespace gc = gradsync::codec;
constexpr std::size_t n = (64u << 20) / sizeof(float);
constexpr int sets = 4;

int failures = 0;

struct Set {
  float* grad;
  float* acc;
  float* residual;
  std::byte* wire_in;   // an encoded gradient, for the decoders
  std::byte* wire_out;  // what encode and decode_add_encode write
};

struct Buffers {
  std::vector<float> host_grad;
  Set set[sets];
  cudaStream_t stream;
  cudaEvent_t start, stop;
  gradsync::cuda::WireStatus* status;
  Buffers() {
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    // Top-k's scratch comes from the stream's pool: keep it between calls.
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    status = new gradsync::cuda::WireStatus(stream);
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.0f, 1e-3f);
    host_grad.resize(n);
    for (auto& x : host_grad) x = d(gen);
    const std::size_t wire = n * 4 + 64;
    for (Set& s : set) {
      check(cudaMalloc(&s.grad, n * 4), "cudaMalloc");
      check(cudaMalloc(&s.acc, n * 4), "cudaMalloc");
      check(cudaMalloc(&s.residual, n * 4), "cudaMalloc");
      check(cudaMalloc(&s.wire_in, wire), "cudaMalloc");
      check(cudaMalloc(&s.wire_out, wire), "cudaMalloc");
      check(cudaMemcpy(s.grad, host_grad.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaMemcpy(s.acc, host_grad.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaMemset(s.residual, 0, n * 4), "cudaMemset");
    }
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
};
Buffers& buffers() {
  static Buffers b;
  return b;
}

std::span<const float> grad(const Set& s) { return {s.grad, n}; }
std::span<float> acc(const Set& s) { return {s.acc, n}; }
std::span<float> residual(const Set& s, const gc::AnyCodec& c) { return {s.residual, c.traits().needs_residual ? n : 0}; }

/// One timed iteration = `body(set)` on every set, between two events on the stream.
template <class F>
void timed(benchmark::State& state, F&& body) {
  auto& b = buffers();
  for (auto _ : state) {
    check(cudaEventRecord(b.start, b.stream), "cudaEventRecord");
    for (const Set& s : b.set) body(s);
    check(cudaEventRecord(b.stop, b.stream), "cudaEventRecord");
    check(cudaEventSynchronize(b.stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
  }
  try {
    b.status->check(b.stream);
  } catch (const std::exception& e) {
    ++failures;
    state.SkipWithError(e.what());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * sets * static_cast<std::int64_t>(n * 4));
}

template <class T>
std::vector<T> to_host(const T* p, std::size_t count) {
  std::vector<T> h(count);
  check(cudaMemcpy(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return h;
}

/// Set 0 against the host codec: the bytes, the residual after an encode with it, decode_add.
/// Returns what differs, or null.
const char* differs_from_host(const gc::AnyCodec& c) {
  auto& b = buffers();
  const Set& s = b.set[0];
  std::vector<float> host_residual(c.traits().needs_residual ? n : 0, 0.0f);
  std::vector<std::byte> host(c.encoded_bytes(n));
  host.resize(c.encode(b.host_grad, host, {.seed = 2, .residual = host_residual}));
  check(cudaMemsetAsync(s.residual, 0, n * 4, b.stream), "cudaMemsetAsync");
  const std::size_t bytes = gradsync::cuda::encode(c, grad(s), std::span(s.wire_out, c.encoded_bytes(n)),
                                                   {.seed = 2, .residual = residual(s, c)}, b.stream);
  check(cudaStreamSynchronize(b.stream), "cudaStreamSynchronize");
  if (to_host(s.wire_out, bytes) != host) return "device bytes differ from the host codec's";
  const auto device_residual = to_host(s.residual, host_residual.size());
  if (std::memcmp(device_residual.data(), host_residual.data(), host_residual.size() * 4) != 0)
    return "device residual differs from the host codec's";
  std::vector<float> host_sum = b.host_grad;
  c.decode_add(host, host_sum);
  check(cudaMemcpy(s.wire_in, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(s.acc, b.host_grad.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  gradsync::cuda::decode_add(c, std::span<const std::byte>(s.wire_in, host.size()), acc(s), *b.status, b.stream);
  b.status->check(b.stream);
  const auto device_sum = to_host(s.acc, n);
  if (std::memcmp(device_sum.data(), host_sum.data(), n * 4) != 0) return "device decode_add differs from the host codec's";
  return nullptr;
}

/// Before a benchmark: each set's wire_in = the codec's encoding of its gradient, acc = the
/// gradient, residual = 0; the first time a codec is seen, its check against the host. False
/// (the benchmark failed) on a mismatch.
bool prepare(benchmark::State& state, const char* name, const gc::AnyCodec& c) {
  static std::map<std::string, const char*> verdicts;
  if (!verdicts.contains(name)) {
    verdicts[name] = differs_from_host(c);
    failures += verdicts[name] != nullptr;
  }
  auto& b = buffers();
  for (const Set& s : b.set) {
    gradsync::cuda::encode(c, grad(s), std::span(s.wire_in, c.encoded_bytes(n)), {.seed = 1}, b.stream);
    check(cudaMemcpyAsync(s.acc, s.grad, n * 4, cudaMemcpyDeviceToDevice, b.stream), "cudaMemcpyAsync");
    check(cudaMemsetAsync(s.residual, 0, n * 4, b.stream), "cudaMemsetAsync");
  }
  check(cudaStreamSynchronize(b.stream), "cudaStreamSynchronize");
  if (verdicts[name]) state.SkipWithError(verdicts[name]);
  return !verdicts[name];
}

void bench_memcpy(benchmark::State& state) {
  auto& b = buffers();
  timed(state, [&](const Set& s) {
    check(cudaMemcpyAsync(s.acc, s.grad, n * 4, cudaMemcpyDeviceToDevice, b.stream), "cudaMemcpyAsync");
  });
}

void bench_encode(benchmark::State& state, const char* name) {
  auto& b = buffers();
  const auto c = gc::AnyCodec::parse(name);
  if (!prepare(state, name, c)) return;
  std::uint64_t it = 0;
  timed(state, [&](const Set& s) {
    gradsync::cuda::encode(c, grad(s), std::span(s.wire_out, c.encoded_bytes(n)),
                           {.seed = 1, .iteration = it++, .residual = residual(s, c)}, b.stream);
  });
  state.counters["wire_MiB"] = double(c.encoded_bytes(n)) / (1 << 20);
}

void bench_decode_add(benchmark::State& state, const char* name) {
  auto& b = buffers();
  const auto c = gc::AnyCodec::parse(name);
  if (!prepare(state, name, c)) return;
  timed(state, [&](const Set& s) {
    gradsync::cuda::decode_add(c, std::span<const std::byte>(s.wire_in, c.encoded_bytes(n)), acc(s), *b.status, b.stream);
  });
}

void bench_decode_add_encode(benchmark::State& state, const char* name) {
  auto& b = buffers();
  const auto c = gc::AnyCodec::parse(name);
  if (!prepare(state, name, c)) return;
  std::uint64_t it = 0;
  timed(state, [&](const Set& s) {
    gradsync::cuda::decode_add_encode(c, std::span<const std::byte>(s.wire_in, c.encoded_bytes(n)), acc(s),
                                      std::span(s.wire_out, c.encoded_bytes(n)),
                                      {.seed = 1, .iteration = it++, .residual = residual(s, c)}, *b.status, b.stream);
  });
}

// The goals (fp16, bf16, qsgd4, qsgd8 >= 0.7x; onebit with its residual >= 0.5x; topk 1%
// encode >= 0.15x), then the rest for reference.
const char* const codecs[] = {"fp16", "bf16", "qsgd4", "qsgd8", "onebit", "topk:0.01",
                              "fp32", "qsgd2", "qsgd16", "qsgd8:norm=l2", "ef+qsgd4"};

const int registered = [] {
  benchmark::RegisterBenchmark("memcpy", bench_memcpy)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  for (const char* c : codecs) {
    const std::string name(c);
    for (auto* bench : {benchmark::RegisterBenchmark(("encode/" + name).c_str(), bench_encode, c),
                        benchmark::RegisterBenchmark(("decode_add/" + name).c_str(), bench_decode_add, c),
                        benchmark::RegisterBenchmark(("decode_add_encode/" + name).c_str(), bench_decode_add_encode, c)})
      bench->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  }
  return 0;
}();

// The device in the results file's context, next to the host and the build (../context.cpp).
void add_device_context() {
  cudaDeviceProp prop{};
  int driver = 0;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaDriverGetVersion(&driver) != cudaSuccess) return;
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::AddCustomContext("gpu_compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
  benchmark::AddCustomContext("cuda_driver", std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10));
}
}  // namespace

int main(int argc, char** argv) {
  add_device_context();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (failures) std::fprintf(stderr, "bench_gpu_codec: %d benchmark(s) failed their check against the host codec\n", failures);
  return failures ? 1 : 0;
}
