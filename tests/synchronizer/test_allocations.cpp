// No heap allocation per unit in steady state: after warm-up iterations, a whole iteration on two
// in-process ranks (slicing, lanes, schedule messages, ring or parameter-server traffic, the
// server's thread, completion) allocates nothing. DGT allocates per unit: the test below says what.
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <new>

#include <gradsync/codec/identity.hpp>
#include <gradsync/collective/differential_ps.hpp>
#include <gradsync/collective/parameter_server.hpp>
#include <gradsync/collective/ring.hpp>
#include <gradsync/priority/forward_order.hpp>
#include <gradsync/slicing/fixed_slices.hpp>
#include <gradsync/synchronizer.hpp>

#include "support/ranks.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
constexpr int kCounted = 3;  // iterations counted
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

namespace {
/// The in-process transport recycles message buffers, but allocates one whenever more messages are
/// in flight at once than ever before, which a loaded machine can make happen after any warm-up:
/// that is the test's transport, not the synchronizer, so its pool gets more buffers than needed.
void fill_buffer_pool(gradsync::transport::Transport& t) {
  const std::vector<std::byte> large(64 << 10);
  for (int i = 0; i < 64; ++i) t.send(t.rank(), 0, large);
  std::vector<std::byte> in(large.size());
  for (int i = 0; i < 64; ++i) t.recv(t.rank(), 0, in);
}

/// Heap allocations on both of two in-process ranks over 3 iterations, after 20 of warm-up (buffer
/// pools reach their size).
template <class Sync>
long steady_state_allocations(const gradsync::ModelLayout& layout, typename Sync::Policies policies) {
  using namespace gradsync;
  std::barrier sync_point(2);
  allocations.store(0);
  testing::run_ranks<int>(2, [&](int r, transport::Transport& t) {
    fill_buffer_pool(t);
    Sync sync(t, layout, {}, policies);
    std::vector<std::vector<float>> g(layout.num_layers());
    for (std::size_t l = 0; l < g.size(); ++l) g[l].assign(layout.layer(l).elements, 1.0f + r);
    auto iteration = [&] {
      for (std::size_t l = 0; l < g.size(); ++l) sync.wait_for(l);
      for (std::size_t l = g.size(); l-- > 0;) sync.gradient_ready(l, g[l]);
      sync.finish_iteration();
    };
    for (int i = 0; i < 20; ++i) iteration();
    sync.wait_all();
    sync_point.arrive_and_wait();
    if (r == 0) counting.store(true);
    sync_point.arrive_and_wait();
    for (int i = 0; i < kCounted; ++i) iteration();
    sync.wait_all();
    sync_point.arrive_and_wait();
    counting.store(false);
    return 0;
  });
  return allocations.load();
}
}  // namespace

TEST_CASE("steady-state iterations do not allocate") {
  using namespace gradsync;
  using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::Ring>;
  REQUIRE(steady_state_allocations<Sync>(testing::uneven_layout(), {.slicing = {.max_elements = 1000}}) == 0);
}

TEST_CASE("the parameter server's steady state does not allocate") {
  using namespace gradsync;
  using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::ParameterServer>;
  REQUIRE(steady_state_allocations<Sync>(testing::uneven_layout(), {.slicing = {.max_elements = 1000}}) == 0);
}

// DGT allocates per unit, every iteration, what this counts (n ranks; the layout's units are each
// served by one rank and pushed by the n - 1 others):
//  - every rank's DifferentialPs::run: the unit's Transfer (its block classification and block
//    magnitudes: 2n), classify's block order and stable_sort's buffer (2n);
//  - the serving rank, its DifferentialCollecting: `taken` and `stage`, each a prototype row, the outer
//    vector and a row per rank (2 (n + 2)); `reported`, its row per rank (n + 1); `pushed`, the
//    push buffer `in`, `dropped_block` (3); the broadcast, made at its header's size and grown to
//    the aggregate's (2);
//  - each worker, push's `dropped_block` (n - 1);
// 8n + 9 in all. With every block important (loss ratio 1, the default p0) no datagram is sent;
// below it, a datagram that reaches its server before the unit does also allocates one buffer
// (DatagramRouter's early_), which depends on timing and so is not counted here.
TEST_CASE("DGT's steady state allocates exactly its per-unit buffers, 8n + 9 per unit") {
  using namespace gradsync;
  using Sync = Synchronizer<slicing::FixedSlices, priority::ForwardOrder, codec::Identity, collective::DifferentialPs>;
  const ModelLayout layout = testing::uneven_layout();
  const slicing::FixedSlices slicing{.max_elements = 1000};
  const long units = static_cast<long>(slicing.plan(layout).size()), n = 2;
  const long counted = steady_state_allocations<Sync>(layout, {.slicing = slicing, .collective = {.block = 256}});
  CAPTURE(units);
  REQUIRE(counted == kCounted * units * (8 * n + 9));
}
