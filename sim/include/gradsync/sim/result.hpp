#pragma once
/// sim::Result: what simulate() (simulator.hpp) found - per-iteration times, the plan it ran
/// (units, keys, stages), each resource's busy share and, when recorded, every compute span,
/// unit and transfer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <gradsync/core/unit.hpp>
#include "collective_model.hpp"

namespace gradsync::sim {

struct ComputeEvent {
  std::uint32_t iteration = 0, layer = 0;
  bool backward = false;
  double start = 0, end = 0;
};
struct UnitEvent {
  std::uint32_t iteration = 0, unit = 0;
  double ready = 0, started = 0, done = 0;  ///< gradient ready, chosen by the window, aggregated
};
struct TransferEvent {  ///< one resource held by one stage of one unit
  std::uint32_t iteration = 0, unit = 0, stage = 0;
  Resource resource = Resource::tx;
  std::uint32_t shard = 0;
  double start = 0, end = 0;
};
struct ResourceUse {
  std::string_view name;
  std::size_t instances = 0;  ///< of this kind that held anything (shards)
  double busy_seconds = 0;    ///< summed over instances
  double mean = 0, max = 0;   ///< busy share of the run, over those instances
};

struct Result {
  std::vector<double> iteration_start;    ///< iterations + 1 entries (the last: when the next could start)
  std::vector<double> iteration_seconds;  ///< iterations entries
  double makespan = 0;                    ///< the last unit aggregated (or the last compute, if later)
  double compute_busy = 0;                ///< seconds the compute stream ran
  std::vector<ResourceUse> resources;     ///< one entry per Resource kind that was used
  std::vector<Unit> units;                ///< the real Slicing's plan
  std::vector<std::uint32_t> keys;        ///< the real Priority's key of each unit
  std::vector<Stage> stages;              ///< every unit's stages, unit u's from stage_offset[u]
  std::vector<std::size_t> stage_offset;  ///< units + 1 entries
  std::vector<ComputeEvent> compute;      ///< (Options::record)
  std::vector<UnitEvent> unit_events;     ///< in completion order (Options::record)
  std::vector<TransferEvent> transfers;   ///< in start order (Options::record)

  /// Mean iteration time after the first (which starts without waiting); the only one if just one.
  double steady_iteration_seconds() const {
    if (iteration_seconds.size() < 2) return iteration_seconds.empty() ? 0 : iteration_seconds[0];
    double s = 0;
    for (std::size_t i = 1; i < iteration_seconds.size(); ++i) s += iteration_seconds[i];
    return s / double(iteration_seconds.size() - 1);
  }
  /// Seconds the busiest link direction is held per iteration (tx, rx, up, down, server tx/rx).
  double wire_seconds_per_iteration() const {
    double worst = 0;
    for (const ResourceUse& r : resources)
      if (r.name != "server") worst = std::max(worst, r.busy_seconds / double(std::max<std::size_t>(r.instances, 1)));
    return iteration_seconds.empty() ? 0 : worst / double(iteration_seconds.size());
  }
};

}  // namespace gradsync::sim
