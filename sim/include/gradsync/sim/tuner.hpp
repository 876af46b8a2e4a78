#pragma once
/// tune(): the auto-tuner. It simulates every setting of a small grid - how layers are sliced, the
/// credit window (units and MiB in flight) and the collectives the caller allows - on a model
/// profile and a network, and ranks the settings by simulated steady iteration time. Unlike
/// ByteScheduler's search by repeated trial, no setting is tried on the real job; unlike Horovod's
/// autotuner, every knob that the credit window and the slicing share is tuned together.
///
/// Deterministic: the same profile, network and space give the same ranking, so ranks that tune
/// from the same inputs choose alike. Ties (within TuneSpace::tie) are where the model is off,
/// and they are settled by what the real runs measured (benchmarks/e2e, 2 and 4 nodes):
/// - when the wire bounds the iteration (the fastest setting takes TuneSpace::wire_bound times the
///   model on an idle link, or more), P3's default where it is among them: there its
///   40,000-element slices measured up to 8% faster than the whole layers the simulator saw as equal;
/// - where a rank measured a core of its own (TuneSpace::cores: the CPU its process got per second
///   of compute, at least TuneSpace::own_core), P3's default too: 2 ranks with a core each,
///   VGG-11, its units beat whole layers with one unit in flight in 11 of 12 round pairs on the
///   two fast links, by up to 8% (benchmarks/e2e/results/2026-11-30-steady-n2-vgg11);
/// - otherwise (ranks sharing cores, or not measured) the grid's first: fewer, larger units and a
///   smaller window, since the CPU each unit costs (which the simulator leaves out) comes off the
///   compute (4 ranks on 2 cores, about 0.5 cores each: whole layers 10% faster than P3's units on
///   the unlimited link, benchmarks/e2e/results/2026-11-30-steady-n4).
///
/// \code
///   namespace sim = gradsync::sim;
///   const auto ranked = sim::tune(profile, sim::Network::from(gradsync::transport::Link::parse("1gbit"), 2), {});
///   ranked.front().slicing;  // e.g. "fixed:160000"
/// \endcode
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/priority/any.hpp>
#include <gradsync/slicing/any.hpp>
#include "simulator.hpp"

namespace gradsync::sim {

/// One setting of the grid and its simulated iteration time.
struct Setting {
  std::string slicing, collective;
  std::size_t inflight_units = 0, credit_bytes = 0;
  double iteration_seconds = 0;
};

/// What tune() searches. The defaults cover P3's default (fixed:40000, 4 MiB) and both sides of it;
/// tune() adds the library's units in flight for the network's ranks (default_inflight_units).
struct TuneSpace {
  std::vector<std::string> slicings{"whole",         "fixed:640000", "fixed:320000", "fixed:160000",
                                    "fixed:80000",   "fixed:40000",  "fixed:20000",  "fixed:10000"};
  std::vector<std::string> collectives{"ring"};
  std::vector<std::size_t> inflight_units{1, 2, 4};
  std::vector<std::size_t> credit_mib{1, 2, 4, 8, 16};
  std::string priority = "forward", codec = "fp32";
  /// Iterations simulated per setting (the first, which starts without waiting, is not counted).
  std::size_t iterations = 4;
  /// Relative difference under which two settings count as equally fast.
  double tie = 0.005;
  /// The fastest setting over the model on an idle link at which the wire bounds the iteration
  /// (ties then go to P3's default). Well above 1: the exchange after the last backward layer
  /// never overlaps, so a compute-bound model sits a little above its idle-link time.
  double wire_bound = 1.5;
  /// The cores a rank had, measured: its process's CPU seconds per second of compute (time
  /// outside waits; about 1 with a core of its own, 0.5 where 4 ranks share 2). 0: not measured.
  double cores = 0;
  /// From this many cores on, a rank has its own: ties go to P3's default.
  static constexpr double own_core = 0.8;
};

/// Whether `s` is P3's default on `ranks` ranks: fixed:40000 on the ring with the library's window.
inline bool is_p3_default(const Setting& s, int ranks) {
  return s.slicing == "fixed:40000" && s.collective == "ring" && s.inflight_units == default_inflight_units(ranks) &&
         s.credit_bytes == gradsync::Options{}.credit_bytes;
}

/// Every setting of `space`, fastest first.
inline std::vector<Setting> tune(const Profile& profile, const Network& net, const TuneSpace& space) {
  if (space.slicings.empty() || space.collectives.empty() || space.inflight_units.empty() || space.credit_mib.empty())
    throw ConfigError("gradsync: the tuner needs at least one slicing, collective, inflight and credit value");
  const auto priority = priority::AnyPriority::parse(space.priority);
  const CodecModel codec = CodecModel::parse(space.codec);
  // The library's own window for these ranks among them, so that the tie rule can find P3's default.
  std::vector<std::size_t> inflight_values = space.inflight_units;
  if (std::ranges::find(inflight_values, default_inflight_units(net.ranks)) == inflight_values.end())
    inflight_values.push_back(default_inflight_units(net.ranks));
  std::vector<Setting> grid;
  for (const std::string& s : space.slicings) {
    const auto slicing = slicing::AnySlicing::parse(s);
    for (const std::string& c : space.collectives) {
      const CollectiveModel collective = CollectiveModel::parse(c);
      for (std::size_t inflight : inflight_values)
        for (std::size_t mib : space.credit_mib) {
          const Options opt{.iterations = space.iterations + 1, .inflight_units = inflight,
                            .credit_bytes = mib << 20, .record = false};
          const Result r = simulate(profile, slicing, priority, codec, collective, net, opt);
          grid.push_back({s, c, inflight, opt.credit_bytes, r.steady_iteration_seconds()});
        }
    }
  }
  // The grid's first setting on a link nothing fills: the compute bound.
  Network idle = net;
  idle.bytes_per_second = 1e300;
  idle.latency_seconds = 0;
  const double compute =
      simulate(profile, slicing::AnySlicing::parse(space.slicings.front()), priority, codec,
               CollectiveModel::parse(space.collectives.front()), idle,
               {.iterations = space.iterations + 1, .inflight_units = space.inflight_units.front(),
                .credit_bytes = space.credit_mib.front() << 20, .record = false})
          .steady_iteration_seconds();
  // The fastest; among settings within `tie` of a faster one, the rule above decides.
  std::vector<Setting> ranked;
  while (!grid.empty()) {
    const double best = std::ranges::min_element(grid, {}, &Setting::iteration_seconds)->iteration_seconds;
    auto tied = [&](const Setting& s) { return s.iteration_seconds <= best * (1 + space.tie); };
    auto pick = std::ranges::find_if(grid, tied);
    if (best >= compute * space.wire_bound || space.cores >= TuneSpace::own_core)
      if (const auto p3 = std::ranges::find_if(grid, [&](const Setting& s) { return is_p3_default(s, net.ranks) && tied(s); });
          p3 != grid.end())
        pick = p3;
    ranked.push_back(*pick);
    grid.erase(pick);
  }
  return ranked;
}

/// P3's default setting on `ranks` ranks (fixed:40000, ring, the library's window) in `ranked`, or
/// null: what a tuned choice is compared with.
inline const Setting* p3_default(const std::vector<Setting>& ranked, int ranks) {
  const auto it = std::ranges::find_if(ranked, [&](const Setting& s) { return is_p3_default(s, ranks); });
  return it == ranked.end() ? nullptr : &*it;
}

}  // namespace gradsync::sim
