// No heap allocation per unit in steady state: after warm-up iterations, a whole iteration on two
// in-process ranks (slicing, lanes, schedule messages, ring traffic, completion) allocates nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <new>

#include "support/ranks.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

// Every replaceable form that the default forms would route through malloc/free, replaced alike, so
// that a block is always freed by the family that allocated it (no -Wmismatched-new-delete). The
// over-aligned forms stay the library's own pair.
namespace {
void* counted_malloc(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(std::size_t n) { return counted_malloc(n); }
void* operator new[](std::size_t n) { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

TEST_CASE("steady-state iterations do not allocate") {
  using namespace gradsync;
  const ModelLayout layout = testing::uneven_layout();
  std::barrier sync_point(2);
  testing::run_ranks<int>(2, [&](int r, transport::Transport& t) {
    Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::Ring> sync(
        t, layout, {}, {.slicing = {.max_elements = 1000}});
    std::vector<std::vector<float>> g(layout.num_layers());
    for (std::size_t l = 0; l < g.size(); ++l) g[l].assign(layout.layer(l).elements, 1.0f + r);
    auto iteration = [&] {
      for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);
      for (std::size_t l = g.size(); l-- > 0;) sync.gradient_ready(l, g[l]);
      sync.finish_iteration();
    };
    for (int i = 0; i < 20; ++i) iteration();  // warm-up: buffer pools reach their size
    sync.wait_all();
    sync_point.arrive_and_wait();
    if (r == 0) counting.store(true);
    sync_point.arrive_and_wait();
    for (int i = 0; i < 3; ++i) iteration();
    sync.wait_all();
    sync_point.arrive_and_wait();
    counting.store(false);
    return 0;
  });
  REQUIRE(allocations.load() == 0);
}
