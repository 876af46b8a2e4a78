#pragma once
/// simulate(): a discrete-event model of data-parallel training iterations, driven by the same
/// Slicing and Priority policy types the Synchronizer uses.
///
/// The model (one representative rank: every rank runs the same profile, so they are symmetric):
///  - Compute is one stream. Forward of layer 0..L-1, then backward L-1..0. The forward of layer
///    l in iteration i+1 first waits until every unit carrying one of l's tensors in iteration i
///    is aggregated (Synchronizer::wait_for: P3's overlap of communication with the next forward).
///  - At the end of layer l's backward its tensors' gradients are handed over; a unit (from the
///    real Slicing's plan of Profile::layout()) is ready once all the tensors it carries are, and
///    enters the ready queue under the real Priority's key (lowest first, FIFO within a key).
///  - The credit window of schedule/credit_window.hpp: while fewer than `inflight_units` units and
///    `credit_bytes` of fp32 are in flight, the most urgent ready unit is chosen; it starts once
///    its bytes fit (or nothing else is in flight).
///  - A started unit runs its collective's stages (collective_model.hpp). A stage waits until
///    every resource it uses is idle; idle resources go to the waiting stages in priority order
///    (key, then start order), non-preemptively: P3's priority queues at the sender and server.
///    A barrier stage waits until every unit of the unit's first tensor has reached it (the
///    window must then hold every unit).
///  - Decisions at time t are taken after every event of time t (a gradient handed over at the
///    instant a link frees is seen by the choice that link's next transfer makes).
///  - Rank skew, when the profile carries measured per-iteration compute (`iteration_seconds`):
///    in each iteration every rank draws its pace, a sample over the samples' median, and the
///    iteration's layers take the slowest rank's pace. That is exact for this model, not an
///    approximation: a unit is ready when it is ready on every rank, every rank's forward waits
///    for the same aggregated units, and a rank that is slower by a constant factor is then never
///    ahead of a faster one at any layer, so the slowest rank is the last everywhere. Ranks are
///    drawn independently: N ranks' slowest pace grows with N (a straggler at scale).
///
/// Invariants: the units of one iteration are all aggregated before the next iteration's
/// backward (the forward waits for them), so a unit is in flight at most once at a time; every
/// unit of every iteration completes (the run ends when the last one has).
///
/// Output (result.hpp): per-iteration times (start of one forward to the start of the next, the
/// last one to the moment its successor could start), per-unit events, every resource use (the
/// transfers), the compute spans, and each resource's busy share.
///
/// simulate() checks its inputs (Options: options.hpp) and builds the plan - the units, their
/// keys and their collectives' stages; engine.hpp's event loop runs it.
///
/// \code
///   namespace sim = gradsync::sim;
///   sim::Profile profile = sim::builtin_profile("resnet50", {});
///   auto net = sim::Network::from(gradsync::transport::Link::parse("10gbit"), 64);
///   auto r = sim::simulate(profile, gradsync::slicing::FixedSlices{40'000}, gradsync::priority::ForwardOrder{},
///                          sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net,
///                          {.iterations = 10});
///   r.steady_iteration_seconds();
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <gradsync/priority/concept.hpp>
#include <gradsync/slicing/concept.hpp>
#include "codec_model.hpp"
#include "collective_model.hpp"
#include "engine.hpp"
#include "network.hpp"
#include "options.hpp"
#include "profile.hpp"
#include "result.hpp"

namespace gradsync::sim {

/// Simulates `options.iterations` iterations of `profile` with the real `slicing` and `priority`
/// policies, the `codec` and `collective` cost models, on `net`. Throws ConfigError on a bad
/// profile, network, codec rate or window.
template <slicing::Slicing S, priority::Priority P>
Result simulate(const Profile& profile, const S& slicing, P priority, const CodecModel& codec,
                const CollectiveModel& collective, const Network& net, Options options) {
  profile.validate();
  net.validate();
  codec.validate();
  if (options.iterations == 0) throw ConfigError("gradsync: simulate at least 1 iteration");
  if (options.inflight_units == 0) options.inflight_units = default_inflight_units(net.ranks);
  if (options.credit_bytes == 0) throw ConfigError("gradsync: the simulator's credit_bytes must be at least 1");
  Result r;
  const ModelLayout layout = profile.layout();
  r.units = slicing.plan(layout);
  const std::size_t fp32_below = codec.bypass_threshold(layout);
  r.stage_offset.push_back(0);
  for (std::uint32_t u = 0; u < r.units.size(); ++u) {
    const Unit& unit = r.units[u];
    r.keys.push_back(priority.key(unit));
    const bool fp32 = std::all_of(unit.segments.begin(), unit.segments.end(),
                                  [&](const Segment& s) { return layout.layer(s.layer).elements < fp32_below; });
    collective.stages(UnitWork{u, unit.elements, fp32}, codec, net, r.stages);
    r.stage_offset.push_back(r.stages.size());
  }
  if (std::any_of(r.stages.begin(), r.stages.end(), [](const Stage& s) { return s.barrier; })) {
    // Units parked at a barrier hold their place in the window; a window that holds every unit
    // (KVStore has none) cannot fill up with units waiting for ones it keeps out.
    std::size_t bytes = 0;
    for (const Unit& unit : r.units) bytes += unit.elements * sizeof(float);
    if (r.units.size() > options.inflight_units || bytes > options.credit_bytes)
      throw ConfigError("gradsync: with the tensor pull (MXNet KVStore, no window) the window must hold every unit: " +
                        std::to_string(r.units.size()) + " units, " + std::to_string(bytes) +
                        " bytes; raise --inflight and --credit");
  }
  detail::Engine(profile, r, net, options).run();
  return r;
}

}  // namespace gradsync::sim
