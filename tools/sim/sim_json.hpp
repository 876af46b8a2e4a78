#pragma once
// gradsync-sim's JSON: results and Chrome traces out (profiles in and out: gradsync/sim/profile_json.hpp).
#include <string>

#include <nlohmann/json.hpp>

#include <gradsync/core/error.hpp>
#include <gradsync/sim/collective_model.hpp>
#include <gradsync/sim/profile.hpp>
#include <gradsync/sim/simulator.hpp>

#include <gradsync/sim/profile_json.hpp>

namespace gradsync::sim {

/// The name of unit `u`: its first tensor, with the slice or the count of fused tensors.
inline std::string unit_name(const Result& r, const ModelLayout& layout, std::uint32_t u) {
  const Unit& unit = r.units[u];
  const Segment& s = unit.segments.front();
  std::string name = "unit " + std::to_string(u) + " " + layout.layer(s.layer).name;
  if (unit.fused()) name += " +" + std::to_string(unit.segments.size() - 1);
  else if (s.length != layout.layer(s.layer).elements)
    name += " [" + std::to_string(s.offset) + ", " + std::to_string(s.offset + s.length) + ")";
  return name;
}

/// Times, utilization and (when recorded) every event, as gradsync-sim --json writes them.
inline nlohmann::json result_json(const Result& r, const Profile& p, nlohmann::json config) {
  const ModelLayout layout = p.layout();
  nlohmann::json resources = nlohmann::json::object();
  for (const ResourceUse& u : r.resources)
    resources[std::string(u.name)] = {{"instances", u.instances}, {"busy_seconds", u.busy_seconds},
                                      {"mean_utilization", u.mean}, {"max_utilization", u.max}};
  nlohmann::json units = nlohmann::json::array();
  for (std::uint32_t u = 0; u < r.units.size(); ++u)
    units.push_back({{"unit", u}, {"name", unit_name(r, layout, u)}, {"elements", r.units[u].elements},
                     {"key", r.keys[u]}, {"stages", r.stage_offset[u + 1] - r.stage_offset[u]}});
  nlohmann::json unit_events = nlohmann::json::array(), transfers = nlohmann::json::array(),
                 compute = nlohmann::json::array();
  for (const UnitEvent& e : r.unit_events)
    unit_events.push_back({{"iteration", e.iteration}, {"unit", e.unit}, {"ready", e.ready}, {"started", e.started},
                           {"done", e.done}});
  for (const TransferEvent& e : r.transfers)
    transfers.push_back({{"iteration", e.iteration}, {"unit", e.unit}, {"stage", e.stage},
                         {"resource", resource_names[std::size_t(e.resource)]}, {"shard", e.shard},
                         {"start", e.start}, {"end", e.end}});
  for (const ComputeEvent& e : r.compute)
    compute.push_back({{"iteration", e.iteration}, {"layer", p.layers[e.layer].name},
                       {"pass", e.backward ? "backward" : "forward"}, {"start", e.start}, {"end", e.end}});
  return {{"config", std::move(config)},
          {"iteration_seconds", r.iteration_seconds},
          {"iteration_start", r.iteration_start},
          {"steady_iteration_seconds", r.steady_iteration_seconds()},
          {"compute_seconds_per_iteration", p.compute_seconds()},
          {"wire_seconds_per_iteration", r.wire_seconds_per_iteration()},
          {"makespan_seconds", r.makespan},
          {"compute_utilization", r.makespan > 0 ? r.compute_busy / r.makespan : 0.0},
          {"resources", resources},
          {"units", units},
          {"unit_events", unit_events},
          {"transfers", transfers},
          {"compute", compute}};
}

/// A Chrome trace (Perfetto, chrome://tracing) of the representative rank: compute (tid 0), units
/// waiting to be chosen (tid 1), each resource kind (tid 2 + kind; shards as tid 10000 * kind + shard).
inline nlohmann::json trace_json(const Result& r, const Profile& p) {
  const ModelLayout layout = p.layout();
  nlohmann::json events = nlohmann::json::array();
  auto span = [&](const std::string& name, const char* cat, std::size_t tid, double start, double end) {
    events.push_back({{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", 0}, {"tid", tid}, {"ts", start * 1e6},
                      {"dur", (end - start) * 1e6}});
  };
  auto thread = [&](std::size_t tid, const std::string& name) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", {{"name", name}}}});
  };
  thread(0, "compute");
  thread(1, "units ready, not chosen");
  std::vector<char> named(16, 0);
  for (const ComputeEvent& e : r.compute)
    span(p.layers[e.layer].name + (e.backward ? " backward" : " forward"), "compute", 0, e.start, e.end);
  for (const UnitEvent& e : r.unit_events)
    if (e.started > e.ready) span(unit_name(r, layout, e.unit), "queued", 1, e.ready, e.started);
  for (const TransferEvent& e : r.transfers) {
    const auto kind = std::size_t(e.resource);
    const std::size_t tid = kind < 2 ? 2 + kind : 10000 * kind + e.shard;
    if (tid >= named.size()) named.resize(tid + 1, 0);
    if (!named[tid]) thread(tid, std::string(resource_names[kind]) + (kind < 2 ? "" : " " + std::to_string(e.shard)));
    named[tid] = 1;
    span(unit_name(r, layout, e.unit), resource_names[kind].data(), tid, e.start, e.end);
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace gradsync::sim
