// 06: why the order of units matters on a slow network (P3), measured through Options::on_unit
// and stats().
//
// Two ranks talk over an emulated 200 Mbit/s link (transport::Throttled, a decorator any transport
// can wear). Backward hands over the last layer first; the next forward pass needs the first layer
// first. With Fifo, the first layer's units queue behind everything handed over before them, so
// the next iteration's wait_for(0) waits for the whole model; with ForwardOrder they overtake
// the queue, and the wait ends after a fraction of it. The credit window (Options::credit_bytes)
// keeps few units on the wire, so a more urgent unit does not wait behind a full queue.
//
// The times are printed, not checked (a loaded machine stretches them); what is checked does not
// depend on timing: both priorities move the same units and bytes, and the units run in each
// priority's order (example::UnitOrder keeps thread timing out of it), so layer 0 finishes last
// under Fifo and among the first under ForwardOrder.
#include <gradsync/gradsync.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;
using clock_type = std::chrono::steady_clock;

constexpr int iterations = 3;
const gs::ModelLayout layout{{"conv1", 40'000}, {"conv2", 40'000}, {"conv3", 40'000},
                             {"conv4", 40'000}, {"fc1", 40'000},   {"fc2", 40'000}};

struct Measured {
  double first_layer_wait_ms = 0;  ///< rank 0, per iteration: wait_for(0) right after backward
  double first_layer_place = 0;    ///< where layer 0's last unit finished among all units, 0..1
  bool in_order = false;           ///< the units ran in the order the priority promises
  std::size_t units = 0;           ///< units per iteration
  gs::Statistics stats;
};

template <class Priority>
Measured measure() {
  Measured m;
  example::UnitOrder order(2);  // rank 0's units in the order they ran
  example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
    gs::transport::Throttled<> slow(t, gs::transport::Link::parse("200mbit"));
    gs::Options options{.credit_bytes = 64u << 10, .inflight_units = 1};
    if (rank == 0) options.on_unit = order.on_unit();
    gs::Synchronizer<gs::slicing::FixedSlices, Priority, gs::codec::Identity, gs::collective::Ring> sync{
        slow, layout, options, {.slicing = {.max_elements = 8'000}}};
    std::vector<std::vector<float>> grad(layout.num_layers());
    for (int it = 0; it < iterations; ++it) {
      for (std::size_t l = layout.num_layers(); l-- > 0;) {  // backward: last layer first
        grad[l].assign(layout.layer(l).elements, 1.0f);
        sync.gradient_ready(l, grad[l]);
      }
      sync.finish_iteration();
      order.handed_over();
      const auto t0 = clock_type::now();
      sync.wait_for(0);  // the next forward pass starts with layer 0
      if (rank == 0) m.first_layer_wait_ms += std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
      sync.wait_all();
    }
    if (rank != 0) return;
    m.first_layer_wait_ms /= iterations;
    m.units = sync.units().size();
    const std::vector<std::uint32_t>& ran = order.units();  // complete: every unit is done
    for (std::size_t i = 0; i < ran.size(); ++i)
      if (sync.units()[ran[i]].first_layer() == 0)
        m.first_layer_place = std::max(m.first_layer_place, double(i % m.units + 1) / double(m.units));
    m.in_order = order.follows(example::UnitOrder::promised(sync.units(), [](const gs::Unit& u) { return Priority{}.key(u); }));
    m.stats = sync.stats();
  });
  return m;
}

int main() {
  return example::run([] {
    const Measured fifo = measure<gs::priority::Fifo>();
    const Measured forward = measure<gs::priority::ForwardOrder>();
    for (auto [name, m] : {std::pair{"fifo", fifo}, std::pair{"forward", forward}})
      std::printf("%-8s wait_for(layer 0) %6.1f ms; layer 0 done after %3.0f%% of the units; %llu units, "
                  "%.1f MB sent, %.0f ms on the wire\n",
                  name, m.first_layer_wait_ms, 100 * m.first_layer_place, static_cast<unsigned long long>(m.stats.units),
                  m.stats.bytes_sent / 1e6, 1e3 * m.stats.wire_seconds);
    for (const Measured* m : {&fifo, &forward}) {
      example::check(m->stats.units == iterations * m->units, "every unit of every iteration was aggregated");
      example::check(m->in_order, "the units ran in the priority's order");
    }
    example::check(fifo.stats.bytes_sent == forward.stats.bytes_sent, "the order changes no byte on the wire");
    example::check(fifo.first_layer_place == 1.0, "under Fifo the first layer finishes last");
    example::check(forward.first_layer_place < 0.25, "under ForwardOrder the first layer overtakes the queue");
  });
}
