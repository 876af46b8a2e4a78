// Schedule queue cost per unit: one producer (the backward pass calling gradient_ready) pushes a
// whole iteration's units into the priority lanes, last layer first; a consumer thread (an
// executor choosing its next unit) pops them, most urgent first. items_per_second = units per second through enqueue + dequeue.
// A second benchmark measures the whole Synchronizer path per unit on one rank (no network).
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

#include <gradsync/gradsync.hpp>

namespace gs = gradsync;

static void BM_LanesProducerConsumer(benchmark::State& state) {
  const auto units = static_cast<std::uint32_t>(state.range(0));
  const std::uint32_t levels = 160;  // about ResNet-50's parameter tensors
  auto key = [&](std::uint32_t u) { return static_cast<std::uint32_t>(std::uint64_t{u} * levels / units); };
  std::vector<std::size_t> cap(levels, 0);
  for (std::uint32_t u = 0; u < units; ++u) ++cap[key(u)];
  gs::priority::Lanes lanes(cap);

  std::atomic<std::uint64_t> popped{0};
  std::atomic<bool> stop{false};
  std::jthread consumer([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const auto seen = lanes.pushes();
      if (lanes.try_pop()) {
        popped.fetch_add(1, std::memory_order_release);
        popped.notify_one();
      } else if (!stop.load()) {
        lanes.wait_for_push(seen);
      }
    }
  });
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::uint32_t u = units; u-- > 0;) lanes.push(key(u), u);
    target += units;
    for (auto p = popped.load(std::memory_order_acquire); p < target; p = popped.load(std::memory_order_acquire))
      popped.wait(p);
  }
  stop.store(true);
  lanes.wake();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * units);
  state.counters["ns_per_unit"] = benchmark::Counter(static_cast<double>(state.iterations()) * units,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LanesProducerConsumer)->Arg(1000)->Arg(10000)->UseRealTime();

// gradient_ready -> lanes -> executor (chooses and runs; 1-rank ring: no traffic) -> wait_all.
static void BM_SynchronizerPerUnit(benchmark::State& state) {
  const auto units = static_cast<std::size_t>(state.range(0));
  std::vector<gs::LayerSpec> specs;
  for (std::size_t l = 0; l < 100; ++l) specs.push_back({std::string("l").append(std::to_string(l)), units / 100});  // not "l" + ...: GCC 12 warns -Wrestrict falsely (bug 105651)
  gs::ModelLayout layout(specs);
  gs::transport::InProcessGroup group(1);
  gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Identity, gs::collective::Ring>
      sync(group.rank(0), layout, {}, {.slicing = {.max_elements = 1}});
  std::vector<std::vector<float>> grads(100, std::vector<float>(units / 100, 1.0f));
  for (auto _ : state) {
    for (std::size_t l = 100; l-- > 0;) sync.gradient_ready(l, grads[l]);
    sync.finish_iteration();
    sync.wait_all();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * units));
}
BENCHMARK(BM_SynchronizerPerUnit)->Arg(1000)->Arg(10000)->UseRealTime();

BENCHMARK_MAIN();
