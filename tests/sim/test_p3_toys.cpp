// P3's toy examples (Jayarajan et al., SysML 2019, section 3, Figures 4 and 6), event by event.
//
// The paper's text fixes the timings (the figures' pictures are not in our copy of it): three
// layers, forward and backward of each take one time unit; in Figure 4 synchronizing a layer
// takes two time units; in Figure 6 its three parts - gradient propagation (the worker's uplink),
// parameter update (the server) and parameter propagation (the downlink) - take one unit each,
// and three for the middle layer, which slicing cuts into three. The claims the expectations
// below are checked against:
//  - Fig. 4(a), WFBP: "the total delay between the two iterations is twice the time taken for
//    synchronizing the first layer" (4 units), and the network is idle during the forward pass;
//  - Fig. 4(b), P3's priority: "the delay between the two iterations has been reduced by half"
//    (2 units), communication overlapping the next forward pass;
//  - Fig. 6(a): "spending the last three time steps just for receiving parameter updates";
//  - Fig. 6(b): slices perfectly pipelined, both directions busy, "communication cost reduced by
//    30%" (here: the iteration from 15 to 10 units, 33%).
// Every expected number is derived by hand from those timings (one time unit = 1 s) in the
// comments, not taken from the simulator. Layer index 0 is the paper's layer 1 (the first of
// the forward pass). Both toys use an unbounded window: P3 keeps every slice in its priority
// queues and sends the most urgent one whenever the link is free.
#include <catch2/catch.hpp>

#include <gradsync/priority/forward_order.hpp>
#include <gradsync/priority/fifo.hpp>
#include <gradsync/sim/models.hpp>
#include <gradsync/sim/simulator.hpp>
#include <gradsync/slicing/fixed_slices.hpp>
#include <gradsync/slicing/whole_layer.hpp>

namespace sim = gradsync::sim;
using sim::Resource;

namespace {

constexpr sim::Options unbounded{.iterations = 3, .inflight_units = 64, .credit_bytes = std::size_t(1) << 62};

/// The one span unit `u` of iteration `it` held `res` for.
std::pair<double, double> held(const sim::Result& r, std::uint32_t it, std::uint32_t u, Resource res) {
  std::vector<std::pair<double, double>> found;
  for (const auto& e : r.transfers)
    if (e.iteration == it && e.unit == u && e.resource == res) found.emplace_back(e.start, e.end);
  REQUIRE(found.size() == 1);
  return found.front();
}
const sim::UnitEvent& unit_event(const sim::Result& r, std::uint32_t it, std::uint32_t u) {
  for (const auto& e : r.unit_events)
    if (e.iteration == it && e.unit == u) return e;
  FAIL("no event for unit " << u << " of iteration " << it);
  throw;
}
double forward_start(const sim::Result& r, std::uint32_t it, std::uint32_t layer) {
  for (const auto& e : r.compute)
    if (e.iteration == it && e.layer == layer && !e.backward) return e.start;
  FAIL("no forward of layer " << layer << " in iteration " << it);
  return 0;
}
using Span = std::pair<double, double>;

// Figure 4: a 2-time-unit synchronization per layer = a ring over 2 ranks at 1 Gbit/s moving
// 62.5M fp32 values: 2 steps of 125 MB at 125 MB/s (both directions of the link at once).
template <class Priority>
sim::Result figure4(Priority p) {
  const auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 2);
  return sim::simulate(sim::builtin_profile("p3-fig4", {}), gradsync::slicing::WholeLayer{}, p,
                       sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net, unbounded);
}

/// Units `order` of iteration 0 pushed (tx), updated (server) and broadcast (rx) one time unit
/// apart, the first pushed over [4,5]: the pipeline of Figure 6(b).
void check_pipeline(const sim::Result& r, const std::uint32_t (&order)[5]) {
  for (double k = 0; const std::uint32_t u : order) {
    CAPTURE(u);
    CHECK(held(r, 0, u, Resource::tx) == Span{4 + k, 5 + k});
    CHECK(held(r, 0, u, Resource::server) == Span{5 + k, 6 + k});
    CHECK(held(r, 0, u, Resource::rx) == Span{6 + k, 7 + k});
    ++k;
  }
}

// Figure 6: one worker, one server, 1 Gbit/s: pushing or broadcasting 31.25M values (125 MB)
// takes 1 s, adding them at 0.125 GB/s 1 s; the middle layer is three times as large.
template <class Slicing, class Priority>
sim::Result figure6(Slicing s, Priority p) {
  auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 1);
  net.dedicated_servers = 1;
  auto codec = sim::CodecModel::parse("fp32");
  codec.sum_gbps = 0.125;
  return sim::simulate(sim::builtin_profile("p3-fig6", {}), s, p, codec, sim::CollectiveModel::parse("ps"), net,
                       unbounded);
}

}  // namespace

TEST_CASE("P3 Figure 4(a): wait-free backprop queues the first layer behind the others", "[sim][p3]") {
  const auto r = figure4(gradsync::priority::Fifo{});
  // Forward 0-3, backward of layer 2 ends at 4, layer 1 at 5, layer 0 at 6. FIFO: layer 2 syncs
  // [4,6], layer 1 [6,8], layer 0 [8,10]; the next forward starts at 10: a delay of 4 after the
  // backward pass = twice layer 0's 2-unit synchronization. Same every iteration: 10 units.
  CHECK(held(r, 0, 2, Resource::tx) == Span{4, 6});
  CHECK(held(r, 0, 1, Resource::tx) == Span{6, 8});
  CHECK(held(r, 0, 0, Resource::tx) == Span{8, 10});
  CHECK(held(r, 0, 0, Resource::rx) == Span{8, 10});  // full duplex: both ways at once
  CHECK(unit_event(r, 0, 1).ready == 5);
  CHECK(unit_event(r, 0, 0).ready == 6);
  CHECK(forward_start(r, 1, 0) == 10);
  CHECK(forward_start(r, 1, 0) - 6 == 2 * 2);  // the paper: twice the first layer's sync
  CHECK(r.iteration_seconds == std::vector<double>{10, 10, 10});
  // Iteration 1 repeats iteration 0 ten units later.
  CHECK(held(r, 1, 2, Resource::tx) == Span{14, 16});
  CHECK(held(r, 1, 0, Resource::tx) == Span{18, 20});
  // The network is idle during every forward pass ([0,3], [10,13], [20,23]).
  for (const auto& c : r.compute)
    if (!c.backward)
      for (const auto& e : r.transfers) CHECK((e.end <= c.start || e.start >= c.end));
}

TEST_CASE("P3 Figure 4(b): forward-order priority halves the delay between iterations", "[sim][p3]") {
  const auto r = figure4(gradsync::priority::ForwardOrder{});
  // Layer 2 syncs [4,6] (nothing else is ready at 4). At 6 layers 1 (ready at 5) and 0 (ready at
  // 6) wait; layer 0 is more urgent: [6,8], then layer 1 [8,10]. The next forward of layer 0
  // starts at 8 (delay 2, half of 4); layer 1's forward waits for its sync until 10.
  CHECK(held(r, 0, 2, Resource::tx) == Span{4, 6});
  CHECK(held(r, 0, 0, Resource::tx) == Span{6, 8});
  CHECK(held(r, 0, 1, Resource::tx) == Span{8, 10});
  CHECK(forward_start(r, 1, 0) == 8);
  CHECK(forward_start(r, 1, 1) == 10);  // layer 1's sync overlaps layer 0's forward
  CHECK(forward_start(r, 1, 2) == 11);
  // Iteration 1: backward 12-15: layer 2 [13,15], layer 0 [15,17], layer 1 [17,19]; iteration 2
  // starts at 17. Iteration times 8, 9, 9.
  CHECK(held(r, 1, 2, Resource::tx) == Span{13, 15});
  CHECK(held(r, 1, 0, Resource::tx) == Span{15, 17});
  CHECK(held(r, 1, 1, Resource::tx) == Span{17, 19});
  CHECK(forward_start(r, 2, 0) == 17);
  CHECK(r.iteration_seconds == std::vector<double>{8, 9, 9});
  CHECK(r.steady_iteration_seconds() < figure4(gradsync::priority::Fifo{}).steady_iteration_seconds());
}

TEST_CASE("P3 Figure 6(a): a heavy middle layer at layer granularity", "[sim][p3]") {
  const auto r = figure6(gradsync::slicing::WholeLayer{}, gradsync::priority::Fifo{});
  // Layer 2 (ready 4): push [4,5], update [5,6], broadcast [6,7]. Layer 1 (ready 5): push [5,8],
  // update [8,11], broadcast [11,14]. Layer 0 (ready 6): push after layer 1's, [8,9]; update
  // after layer 1's, [11,12]; broadcast after layer 1's, [14,15]. The next forward at 15.
  CHECK(held(r, 0, 2, Resource::tx) == Span{4, 5});
  CHECK(held(r, 0, 2, Resource::server) == Span{5, 6});
  CHECK(held(r, 0, 2, Resource::rx) == Span{6, 7});
  CHECK(held(r, 0, 1, Resource::tx) == Span{5, 8});
  CHECK(held(r, 0, 1, Resource::server) == Span{8, 11});
  CHECK(held(r, 0, 1, Resource::rx) == Span{11, 14});
  CHECK(held(r, 0, 0, Resource::tx) == Span{8, 9});
  CHECK(held(r, 0, 0, Resource::server) == Span{11, 12});
  CHECK(held(r, 0, 0, Resource::rx) == Span{14, 15});
  CHECK(forward_start(r, 1, 0) == 15);
  // "the last three time steps just for receiving": from 12 to 15 only parameter propagation
  // works (the server sending, the worker receiving); the uplink and the server's updates rest.
  for (const auto& e : r.transfers)
    if (e.iteration == 0 && e.end > 12) CHECK((e.resource == Resource::rx || e.resource == Resource::server_tx));
  CHECK(r.iteration_seconds == std::vector<double>{15, 15, 15});
  // Forward-order priority cannot help here: the heavy layer already holds the links (no preemption).
  CHECK(figure6(gradsync::slicing::WholeLayer{}, gradsync::priority::ForwardOrder{}).iteration_seconds ==
        std::vector<double>{15, 15, 15});
}

TEST_CASE("P3 Figure 6(b): slicing pipelines the heavy layer - with priority the next iteration starts early",
          "[sim][p3]") {
  // fixed slices of 31.25M values: unit 0 = layer 0, units 1-3 = layer 1's three slices (a, b, c),
  // unit 4 = layer 2.
  SECTION("slicing alone (FIFO)") {
    const auto r = figure6(gradsync::slicing::FixedSlices{31'250'000}, gradsync::priority::Fifo{});
    REQUIRE(r.units.size() == 5);
    // Push (tx), update (server), broadcast (rx), one unit each, in FIFO order 4, a, b, c, 0:
    // 4: [4,5] [5,6] [6,7]; a: [5,6] [6,7] [7,8]; b: [6,7] [7,8] [8,9]; c: [7,8] [8,9] [9,10];
    // layer 0 (ready 6, behind the slices): [8,9] [9,10] [10,11]. Next forward at 11.
    const std::uint32_t order[] = {4, 1, 2, 3, 0};
    check_pipeline(r, order);
    CHECK(forward_start(r, 1, 0) == 11);
    CHECK(r.iteration_seconds == std::vector<double>{11, 11, 11});
  }
  SECTION("P3: slicing and forward-order priority") {
    const auto r = figure6(gradsync::slicing::FixedSlices{31'250'000}, gradsync::priority::ForwardOrder{});
    // Layer 0 (ready 6) overtakes slices b and c at every resource: pushes 4 [4,5], a [5,6],
    // 0 [6,7], b [7,8], c [8,9]; each update and broadcast follows one unit later, in the same
    // order. Layer 0's broadcast ends at 9: the next forward starts at 9 (11 with FIFO); layer 1's
    // forward waits for slice c until 11. Iteration 1's backward starts at 13, 10 units after
    // iteration 0's: iterations of 9, 10, 10 units against 15 without slicing (-33%).
    const std::uint32_t order[] = {4, 1, 0, 2, 3};
    check_pipeline(r, order);
    CHECK(forward_start(r, 1, 0) == 9);
    CHECK(forward_start(r, 1, 1) == 11);
    CHECK(held(r, 1, 4, Resource::tx) == Span{14, 15});
    CHECK(r.iteration_seconds == std::vector<double>{9, 10, 10});
    // Both directions busy together while the slices stream: [6,9] on tx and on rx.
    for (double t : {6.5, 7.5, 8.5}) {
      bool tx = false, rx = false;
      for (const auto& e : r.transfers) {
        tx = tx || (e.resource == Resource::tx && e.start <= t && t < e.end);
        rx = rx || (e.resource == Resource::rx && e.start <= t && t < e.end);
      }
      CHECK((tx && rx));
    }
  }
}
