// The collective cost models against numbers derived by hand: step counts from ImageNet in Four
// Minutes (section 4.3), the hybrid's switch, the ring's wire bound, the compute bound.
#include <catch2/catch.hpp>

#include <gradsync/priority/forward_order.hpp>
#include <gradsync/sim/simulator.hpp>
#include <gradsync/slicing/even_split.hpp>
#include <gradsync/slicing/fixed_slices.hpp>
#include <gradsync/slicing/whole_layer.hpp>

namespace sim = gradsync::sim;

namespace {

/// One layer of `elements` values, no compute: an iteration lasts as long as its collective.
sim::Profile one_layer(std::size_t elements, double forward = 0, double backward = 0) {
  return {"one-layer", {{"l", forward, backward, {{"l.weight", elements}}}}};
}

/// Steady iteration time with a latency of 1 ms and (practically) infinite bandwidth: the
/// collective's step count, in milliseconds.
double latency_only_ms(const std::string& collective, int ranks, std::size_t elements) {
  sim::Network net;
  net.ranks = ranks;
  net.bytes_per_second = 1e300;
  net.latency_seconds = 1e-3;
  auto fp32 = sim::CodecModel::parse("fp32");
  fp32.sum_gbps = 0;  // a parameter server's sums are free here: only the steps count
  const auto r = sim::simulate(one_layer(elements), gradsync::slicing::WholeLayer{}, gradsync::priority::ForwardOrder{},
                               fp32, sim::CollectiveModel::parse(collective), net, {.iterations = 3});
  return r.steady_iteration_seconds() * 1e3;
}

}  // namespace

TEST_CASE("ring vs hierarchical step counts: 2(p-1) vs 4(k-1) + 2(p/k-1)", "[sim][cost]") {
  // p = 64, k = 8: ring 2*63 = 126; hierarchical 4*7 + 2*7 = 42.
  CHECK(sim::CollectiveModel::parse("ring").steps(64, 4096) == 126);
  CHECK(sim::CollectiveModel::parse("hierarchical:8").steps(64, 4096) == 42);
  // p = 1024, k = 16 (the paper's best k on its 1024 GPUs): ring 2046; 4*15 + 2*63 = 186.
  CHECK(sim::CollectiveModel::parse("ring").steps(1024, 4096) == 2046);
  // the vendor libraries' all-reduces (MPI's, Gloo's on any interface, NCCL's) are rings too
  for (const char* ring : {"mpi", "gloo", "gloo:eth0", "nccl"}) CHECK(sim::CollectiveModel::parse(ring).steps(64, 4096) == 126);
  CHECK(sim::CollectiveModel::parse("hierarchical:16").steps(1024, 4096) == 186);
  // k = 1 is the ring; automatic k on 512 ranks: round(sqrt(256)) = 16.
  CHECK(sim::CollectiveModel::parse("hierarchical:1").steps(64, 4096) == 126);
  CHECK(sim::CollectiveModel::parse("hierarchical").group_size(512) == 16);
  // The same counts as simulated time: one step = one latency of 1 ms.
  CHECK(latency_only_ms("ring", 64, 1000) == Approx(126));
  CHECK(latency_only_ms("hierarchical:8", 64, 1000) == Approx(42));
  CHECK(latency_only_ms("reduce-broadcast", 64, 1000) == Approx(2));
  CHECK(latency_only_ms("ps", 64, 1000) == Approx(2));  // push, broadcast
}

TEST_CASE("hybrid switches from hierarchical to ring at eta bytes", "[sim][cost]") {
  // eta = 256 KiB = 65,536 fp32 values; p = 64, k = 8: 42 steps below, 126 from eta on.
  const auto h = sim::CollectiveModel::parse("hybrid:256KiB:8");
  CHECK(h.steps(64, 65'535 * 4) == 42);
  CHECK(h.steps(64, 65'536 * 4) == 126);
  CHECK(latency_only_ms("hybrid:256KiB:8", 64, 65'535) == Approx(42));
  CHECK(latency_only_ms("hybrid:256KiB:8", 64, 65'536) == Approx(126));
  // Bytes too: at eta and above the ring's 2(p-1) w(n/p); below, hierarchical's.
  sim::Network net;
  net.ranks = 64;
  std::vector<sim::Stage> below, above;
  const auto fp32 = sim::CodecModel::parse("fp32");
  h.stages({0, 65'535, false}, fp32, net, below);
  h.stages({0, 65'536, false}, fp32, net, above);
  REQUIRE(below.size() == 1);
  REQUIRE(above.size() == 1);
  // Below: 4*7 steps of ceil(65535/8) = 8192 values + 2*7 steps of ceil(65535/8) = 8192 values.
  CHECK(below[0].busy() == Approx((28.0 * 8192 + 14.0 * 8192) * 4 / 1.25e9));
  // Above: 126 steps of 65536/64 = 1024 values.
  CHECK(above[0].busy() == Approx(126.0 * 1024 * 4 / 1.25e9));
}

TEST_CASE("communication-bound: the iteration takes the ring's wire time", "[sim][cost]") {
  // 1,000,000 fp32 values on 8 ranks at 1 Gbit/s (125 MB/s), no compute, no latency:
  // 4 MB * 2 * 7/8 / 125 MB/s = 0.056 s, however the layer is sliced (40,000 = 8 * 5,000).
  const auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 8);
  for (std::size_t slice : {40'000u, 1'000'000u}) {
    const auto r = sim::simulate(one_layer(1'000'000), gradsync::slicing::FixedSlices{slice},
                                 gradsync::priority::ForwardOrder{}, sim::CodecModel::parse("fp32"),
                                 sim::CollectiveModel::parse("ring"), net, {.iterations = 4});
    CHECK(r.steady_iteration_seconds() == Approx(0.056));
    CHECK(r.wire_seconds_per_iteration() == Approx(0.056));
  }
  // fp16 halves the bytes (and costs encode/decode time on top): at least half, a bit more.
  const auto half = sim::simulate(one_layer(1'000'000), gradsync::slicing::FixedSlices{}, gradsync::priority::ForwardOrder{},
                                  sim::CodecModel::parse("fp16"), sim::CollectiveModel::parse("ring"), net,
                                  {.iterations = 4});
  CHECK(half.wire_seconds_per_iteration() == Approx(0.028).epsilon(0.01));
  CHECK(half.steady_iteration_seconds() > 0.028);
}

TEST_CASE("compute-bound: the iteration takes the compute time", "[sim][cost]") {
  // Three layers of 0.1 s forward and 0.2 s backward: 0.9 s when the network is free.
  sim::Profile p{"three", {{"a", 0.1, 0.2, {{"a.w", 1000}}}, {"b", 0.1, 0.2, {{"b.w", 100'000}}},
                           {"c", 0.1, 0.2, {{"c.w", 10}}}}};
  sim::Network net;
  net.ranks = 64;
  net.bytes_per_second = 1e300;
  const auto r = sim::simulate(p, gradsync::slicing::FixedSlices{}, gradsync::priority::ForwardOrder{},
                               sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net, {.iterations = 5});
  for (double s : r.iteration_seconds) CHECK(s == Approx(0.9));
}

TEST_CASE("rank skew: each iteration runs at the slowest of the ranks' measured paces", "[sim][cost]") {
  // Compute-bound (the network is free): an iteration lasts its compute at the slowest rank's pace.
  // Measured compute per iteration 0.9 or 1.1 times its median: of 2 ranks, the slower draws 1.1
  // with probability 3/4, so iterations average 1.05x; of 1024, always 1.1x.
  sim::Profile p = one_layer(1000, 0.1, 0.2);
  p.iteration_seconds = {0.27, 0.33};
  auto run = [&](int ranks, bool skew, std::size_t iterations) {
    sim::Network net;
    net.ranks = ranks;
    net.bytes_per_second = 1e300;
    return sim::simulate(p, gradsync::slicing::FixedSlices{}, gradsync::priority::ForwardOrder{},
                         sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net,
                         {.iterations = iterations, .record = false, .rank_skew = skew});
  };
  const auto two = run(2, true, 4001);
  for (double s : two.iteration_seconds) CHECK((s == Approx(0.27) || s == Approx(0.33)));
  CHECK(two.steady_iteration_seconds() == Approx(0.3 * 1.05).epsilon(0.006));  // 4 sigma of 4000 draws
  CHECK(run(1, true, 4001).steady_iteration_seconds() == Approx(0.3).epsilon(0.006));
  for (double s : run(1024, true, 20).iteration_seconds) CHECK(s == Approx(0.33));
  for (double s : run(1024, false, 20).iteration_seconds) CHECK(s == Approx(0.3));
  // Equal seeds draw equally (the tuner compares its settings on the same draws).
  CHECK(run(2, true, 50).iteration_seconds == run(2, true, 50).iteration_seconds);
  p.iteration_seconds = {0.3, -1};
  CHECK_THROWS_WITH(run(2, true, 2), Catch::Contains("iteration_seconds[1]"));
}

TEST_CASE("one rank: nothing to synchronize, every iteration takes the compute", "[sim][cost]") {
  // A unit without stages completes inside the window's decision; the simulator used to stall
  // there, with the next forward pass waiting for it and no event left to wake it.
  sim::Network net;
  net.ranks = 1;
  for (const char* collective : {"ring", "hierarchical", "reduce-broadcast", "ps"}) {
    CAPTURE(collective);
    const auto r = sim::simulate(one_layer(1000, 0.1, 0.2), gradsync::slicing::FixedSlices{},
                                 gradsync::priority::ForwardOrder{}, sim::CodecModel::parse("fp32"),
                                 sim::CollectiveModel::parse(collective), net, {.iterations = 5});
    for (double s : r.iteration_seconds) CHECK(s == Approx(0.3));
  }
}

TEST_CASE("a co-located parameter server moves the ring's bytes - a small window exposes its incast",
          "[sim][cost]") {
  // p = 4, 400,000 values: each rank sends and receives 2 * 3/4 of 1.6 MB on average, as in the ring.
  const auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 4);
  auto run = [&](const char* collective, std::size_t inflight) {
    return sim::simulate(one_layer(400'000), gradsync::slicing::FixedSlices{}, gradsync::priority::ForwardOrder{},
                         sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse(collective), net,
                         {.iterations = 3, .inflight_units = inflight, .credit_bytes = std::size_t(1) << 40});
  };
  const double wire = 2 * 0.75 * 1.6e6 / 1.25e8;  // 0.0192 s
  CHECK(run("ring", 2).wire_seconds_per_iteration() == Approx(wire));
  CHECK(run("ps", 2).wire_seconds_per_iteration() == Approx(wire));
  // One unit at a time: push and broadcast each take the server's 3 pushes, 3 * 160 kB / 125 MB/s,
  // plus the server's sums (3 * 160 kB at 10.34 GB/s): 10 units * (2 * 3.84 ms + 46 us).
  CHECK(run("ps", 1).steady_iteration_seconds() == Approx(10 * (2 * 3.84e-3 + 3 * 1.6e5 / 10.34e9)));
}

TEST_CASE("KVStore's tensor pull - a tensor's broadcasts wait until all of its parts are aggregated", "[sim][cost]") {
  // 2 ranks, a link per pair; one tensor in 3 parts (EvenSplit) on shards 0, 1, 0: part 2's push
  // queues behind part 0's on the link to shard 0, so part 2 is aggregated last.
  auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 2);
  net.shared_nic = false;
  auto run = [&](bool tensor_pull, std::size_t inflight) {
    auto ps = sim::CollectiveModel::parse("ps");
    ps.tensor_pull = tensor_pull;
    return sim::simulate(one_layer(300'000), gradsync::slicing::EvenSplit{.parts = 3, .min_elements = 1},
                         gradsync::priority::ForwardOrder{}, sim::CodecModel::parse("fp32"), ps, net,
                         {.iterations = 1, .inflight_units = inflight, .credit_bytes = std::size_t(1) << 30});
  };
  auto last_update = [](const sim::Result& r) {
    double t = 0;
    for (const auto& e : r.transfers)
      if (e.resource == sim::Resource::server) t = std::max(t, e.end);
    return t;
  };
  auto first_broadcast = [](const sim::Result& r) {
    double t = 1e300;
    for (const auto& e : r.transfers)
      if (e.resource == sim::Resource::down) t = std::min(t, e.start);
    return t;
  };
  const auto kvstore = run(true, 8), p3 = run(false, 8);
  REQUIRE(kvstore.units.size() == 3);
  CHECK(first_broadcast(kvstore) >= last_update(kvstore));
  CHECK(first_broadcast(p3) < last_update(p3));  // without it, part 0 comes back while part 2 is on the way
  CHECK(kvstore.makespan > p3.makespan);
  CHECK(kvstore.stages.size() == p3.stages.size() + 3);  // a barrier per unit
  // Units parked at the barrier hold the window: one too small for every unit could never drain.
  CHECK_THROWS_WITH(run(true, 2), Catch::Contains("window must hold every unit") && Catch::Contains("--inflight"));
}

TEST_CASE("no units in flight given: the library's choice for the network's ranks", "[sim][cost]") {
  // 4 ranks, latency alone: a ring unit is 6 steps of 1 ms, so 12 units take 72 ms over the window.
  sim::Network net;
  net.ranks = 4;
  net.bytes_per_second = 1e300;
  net.latency_seconds = 1e-3;
  auto run = [&](std::size_t inflight) {
    return sim::simulate(one_layer(12'000), gradsync::slicing::FixedSlices{.max_elements = 1000},
                         gradsync::priority::ForwardOrder{}, sim::CodecModel::parse("fp32"),
                         sim::CollectiveModel::parse("ring"), net,
                         {.iterations = 3, .inflight_units = inflight, .credit_bytes = std::size_t(1) << 30})
        .steady_iteration_seconds();
  };
  REQUIRE(gradsync::default_inflight_units(4) == 6);
  CHECK(run(0) == Approx(0.072 / 6));
  CHECK(run(0) == Approx(run(6)));
  CHECK(run(2) == Approx(0.072 / 2));
}

TEST_CASE("bad networks and windows are refused with the fix", "[sim][cost]") {
  const sim::Profile p = one_layer(10);
  auto run = [&](sim::Network net, sim::Options opt) {
    return sim::simulate(p, gradsync::slicing::WholeLayer{}, gradsync::priority::ForwardOrder{},
                         sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net, opt);
  };
  sim::Network zero;
  zero.bytes_per_second = 0;
  CHECK_THROWS_WITH(run(zero, {}), Catch::Contains("bandwidth must be positive"));
  sim::Network none;
  none.ranks = 0;
  CHECK_THROWS_WITH(run(none, {}), Catch::Contains("at least 1 rank"));
  CHECK_THROWS_WITH(run({}, {.iterations = 0}), Catch::Contains("at least 1 iteration"));
  CHECK_THROWS_WITH(sim::CollectiveModel::parse("hierarchical:0"), Catch::Contains("valid: ring"));
  CHECK_THROWS_WITH(sim::CollectiveModel::parse("rign"), Catch::Contains("valid: ring"));
}
