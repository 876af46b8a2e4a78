// Encode/decode throughput of every codec, one thread, on a 64 MiB fp32 unit, next to memcpy of
// the same buffer in the same run. bytes_per_second counts the fp32 input (64 MiB per call)
// for every benchmark, so the numbers compare directly: ratio = codec / memcpy.
//
//   ./bench_codec --benchmark_filter='memcpy|qsgd8'
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gradsync/codec/any.hpp>

namespace {

constexpr std::size_t n = (64u << 20) / sizeof(float);  // 64 MiB of fp32

const std::vector<float>& gradient() {
  static const std::vector<float> g = [] {
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.0f, 1e-3f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  }();
  return g;
}

void count_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n * sizeof(float)));
}

void bench_memcpy(benchmark::State& state) {
  const auto& src = gradient();
  std::vector<float> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  count_bytes(state);
}

template <class C>
void bench_encode(benchmark::State& state, C codec) {
  const auto& g = gradient();
  std::vector<std::byte> wire(codec.encoded_bytes(n));
  std::vector<float> residual(codec.traits().needs_residual ? n : 0);  // the real use: error feedback on
  std::uint64_t it = 0;
  for (auto _ : state) {
    codec.encode(g, wire, {.seed = 1, .iteration = it++, .residual = residual});
    benchmark::DoNotOptimize(wire.data());
    benchmark::ClobberMemory();
  }
  count_bytes(state);
  state.counters["wire_MiB"] = double(wire.size()) / (1 << 20);
}

template <class C>
void bench_decode(benchmark::State& state, C codec) {
  std::vector<std::byte> wire(codec.encoded_bytes(n));
  wire.resize(codec.encode(gradient(), wire, {.seed = 1}));
  std::vector<float> out(n);
  for (auto _ : state) {
    codec.decode(wire, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count_bytes(state);
}

template <class C>
void add(const C& codec) {
  const std::string name(codec.name());
  benchmark::RegisterBenchmark(("encode/" + name).c_str(), bench_encode<C>, codec)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("decode/" + name).c_str(), bench_decode<C>, codec)->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gradsync::codec;
  benchmark::RegisterBenchmark("memcpy", bench_memcpy)->Unit(benchmark::kMillisecond);
  add(Identity{});
  add(Half{});
  add(BFloat16{});
  add(Qsgd<2>{});
  add(Qsgd<4>{});
  add(Qsgd<8>{});
  add(Qsgd<16>{});
  add(OneBit{});
  add(TopK{});
  benchmark::RegisterBenchmark("memcpy", bench_memcpy)->Unit(benchmark::kMillisecond);  // again: drift check
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
