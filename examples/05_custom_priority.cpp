// 05: a priority written by the user. Any type with the three members of the Priority concept
// (gradsync/priority/concept.hpp) works as the Synchronizer's second argument:
//
//   levels(layout) -> std::size_t     how many keys (lanes) there are
//   key(unit)      -> std::uint32_t   the unit's key, < levels; 0 is served first
//   name()         -> string_view     how the handshake and describe() call it
//
// SmallFirst sends small units (biases, norms: latency-bound, and a layer waits for all its
// units) ahead of large ones, and large ones in forward order (P3's rule) after them. The
// static_assert is what the Synchronizer checks too; its message says what is missing.
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
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync sync{t, layout, {}, {.slicing = {.max_elements = 2048}, .priority = {.small = 200}}};
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
  });
}
