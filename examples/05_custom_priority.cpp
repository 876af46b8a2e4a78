// 05: a priority written by the user. Any type with the three members of the Priority concept
// (gradsync/priority/concept.hpp) works as the Synchronizer's second argument:
//
//   levels(layout) -> std::size_t     how many keys (lanes) there are
//   key(unit)      -> std::uint32_t   the unit's key, < levels; 0 is served first
//   name()         -> string_view     how the handshake and describe() call it
//
// SmallFirst sends small units (biases, norms: latency-bound, and a layer waits for all its
// units) ahead of large ones, and large ones in forward order (P3's rule) after them. The
// static_assert is what the Synchronizer checks too; its message says what is missing. The
// example checks that the units ran in SmallFirst's order, which is not the default's (P3's
// ForwardOrder): example::UnitOrder records rank 0's order and keeps thread timing out of it.
// A priority is its members alone; a codec or collective of your own also declares its traits
// (static constexpr codec::Traits / collective::Traits traits(): see docs/policies.md).
#include <gradsync/gradsync.hpp>

#include <cstdio>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;

struct SmallFirst {
  std::size_t small = 1024;  ///< a knob: units of at most this many elements go first

  std::size_t levels(const gs::ModelLayout& layout) const { return 1 + layout.num_layers(); }
  std::uint32_t key(const gs::Unit& u) const { return u.elements <= small ? 0 : 1 + u.first_layer(); }
  std::string_view name() const { return "small-first"; }
};
static_assert(gs::priority::Priority<SmallFirst>, "SmallFirst must satisfy the Priority concept");

int main() {
  return example::run([] {
    const gs::ModelLayout layout{{"conv1.weight", 3000}, {"bn1.weight", 64}, {"conv2.weight", 9000},
                                 {"bn2.weight", 128},    {"fc.weight", 5000}, {"fc.bias", 10}};
    using Sync = gs::Synchronizer<gs::slicing::FixedSlices, SmallFirst, gs::codec::Identity, gs::collective::Ring>;
    std::vector<int> wrong(2, -1);
    example::UnitOrder order(2);
    std::vector<gs::Unit> units;
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      gs::Options options{.inflight_units = 1};
      if (rank == 0) options.on_unit = order.on_unit();
      Sync sync{t, layout, options, {.slicing = {.max_elements = 2048}, .priority = {.small = 200}}};
      if (rank == 0) units = sync.units();
      // The keys SmallFirst gives this layout's units: the 64, 128 and 10 element units first.
      for (const gs::Unit& u : sync.units()) {
        const bool small = u.elements <= 200;
        example::check(SmallFirst{.small = 200}.key(u) == (small ? 0u : 1 + u.first_layer()), "SmallFirst's key");
      }
      std::vector<std::vector<float>> grad(layout.num_layers());
      for (int it = 0; it < 3; ++it) {
        for (std::size_t l = layout.num_layers(); l-- > 0;) {
          grad[l].assign(layout.layer(l).elements, float(rank + it));
          sync.gradient_ready(l, grad[l]);
        }
        sync.finish_iteration();
        order.handed_over();
        sync.wait_all();
        int bad = 0;  // mean of rank + it over ranks 0 and 1
        for (auto& g : grad)
          for (float x : g) bad += x != float(it) + 0.5f;
        wrong[rank] = bad;
        if (bad) return;
      }
      if (rank == 0) std::printf("%s: %zu units, aggregates correct\n", sync.describe().c_str(), sync.units().size());
    });
    example::check(wrong[0] == 0 && wrong[1] == 0, "every rank got the mean under the user's priority");
    // The order SmallFirst promises, and the one the default would have given: they must differ,
    // or this layout shows nothing.
    const auto small_first = example::UnitOrder::promised(units, [](const gs::Unit& u) { return SmallFirst{.small = 200}.key(u); });
    const auto forward = example::UnitOrder::promised(units, [](const gs::Unit& u) { return gs::priority::ForwardOrder{}.key(u); });
    example::check(small_first != forward, "SmallFirst's order differs from ForwardOrder's on this layout");
    example::check(order.follows(small_first), "the units ran in SmallFirst's order (small ones first, then by layer), "
                                               "not ForwardOrder's or the backward pass's");
    std::printf("rank 0 ran the %zu units of each iteration small ones first:", units.size());
    for (std::size_t i = 0; i < units.size(); ++i) std::printf(" %zu", units[order.units()[i]].elements);
    std::printf("\n");
  });
}
