#pragma once
// gradsync-sim's JSON: model profiles in (schema in README.md), results and Chrome traces out.
// Kept out of include/gradsync/sim/ so the library stays free of nlohmann_json.
//
//   gradsync::sim::Profile p = gradsync::sim::read_profile("vgg11.json");   // ConfigError on bad input
//   nlohmann::json j = gradsync::sim::profile_json(p);                         // the same schema
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <gradsync/core/error.hpp>
#include <gradsync/sim/collective_model.hpp>
#include <gradsync/sim/profile.hpp>
#include <gradsync/sim/simulator.hpp>

namespace gradsync::sim {

inline constexpr int profile_schema_version = 1;

/// A profile from its JSON form; `source` names it in errors (a file name).
inline Profile profile_from_json(const nlohmann::json& j, const std::string& source) {
  auto fail = [&](const std::string& where, const std::string& what) -> ConfigError {
    return ConfigError("gradsync: profile " + source + ": " + where + ": " + what +
                       " (schema: tools/sim/README.md, or write one with gradsync-sim --model resnet20 --write-profile FILE)");
  };
  if (!j.is_object()) throw fail("top level", "expected an object with \"layers\"");
  if (j.contains("gradsync_profile") && j["gradsync_profile"] != profile_schema_version)
    throw fail("gradsync_profile", "version " + j["gradsync_profile"].dump() + " is not " +
                                       std::to_string(profile_schema_version) + ", the one this gradsync-sim reads");
  Profile p;
  if (j.contains("model")) {
    if (!j["model"].is_string()) throw fail("model", "expected a string, got " + j["model"].dump());
    p.name = j["model"].get<std::string>();
  } else {
    p.name = source;
  }
  if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
    throw fail("layers", "expected a non-empty array of layers in forward order");
  auto seconds = [&](const nlohmann::json& layer, const std::string& at, const char* key) {
    if (!layer.contains(key)) throw fail(at, std::string("missing \"") + key + "\" (seconds, a number >= 0)");
    const nlohmann::json& v = layer[key];
    if (!v.is_number() || !(v.get<double>() >= 0))
      throw fail(at + "." + key, "expected seconds as a number >= 0, got " + v.dump());
    return v.get<double>();
  };
  for (std::size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    const std::string at = "layers[" + std::to_string(i) + "]";
    if (!l.is_object()) throw fail(at, "expected an object with \"forward_seconds\", \"backward_seconds\", \"tensors\"");
    ComputeLayer layer;
    layer.name = l.contains("name") && l["name"].is_string() ? l["name"].get<std::string>() : at;
    layer.forward_seconds = seconds(l, at, "forward_seconds");
    layer.backward_seconds = seconds(l, at, "backward_seconds");
    if (l.contains("tensors")) {
      if (!l["tensors"].is_array()) throw fail(at + ".tensors", "expected an array of {\"name\", \"elements\"}");
      for (std::size_t k = 0; k < l["tensors"].size(); ++k) {
        const nlohmann::json& t = l["tensors"][k];
        const std::string tat = at + ".tensors[" + std::to_string(k) + "]";
        if (!t.is_object() || !t.contains("elements"))
          throw fail(tat, "expected an object with \"elements\" (and a \"name\")");
        if (!t["elements"].is_number_unsigned() || t["elements"].get<std::uint64_t>() == 0)
          throw fail(tat + ".elements", "expected a whole number >= 1, got " + t["elements"].dump() +
                                            " (leave tensors without gradients out)");
        if (t["elements"].get<std::uint64_t>() > UINT32_MAX)
          throw fail(tat + ".elements", "more than 2^32-1 elements; split the tensor");
        layer.tensors.push_back({t.contains("name") && t["name"].is_string() ? t["name"].get<std::string>()
                                                                            : layer.name + "." + std::to_string(k),
                                 t["elements"].get<std::size_t>()});
      }
    }
    p.layers.push_back(std::move(layer));
  }
  p.validate();
  return p;
}

/// Reads a profile file; ConfigError names the file and what is wrong with it.
inline Profile read_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("gradsync: cannot open profile " + path + ": check the path (--profile FILE)");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError("gradsync: profile " + path + " is not valid JSON: " + e.what());
  }
  return profile_from_json(j, path);
}

/// The JSON form of `p` (what read_profile reads).
inline nlohmann::json profile_json(const Profile& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const ComputeLayer& l : p.layers) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const LayerSpec& t : l.tensors) tensors.push_back({{"name", t.name}, {"elements", t.elements}});
    layers.push_back({{"name", l.name}, {"forward_seconds", l.forward_seconds},
                      {"backward_seconds", l.backward_seconds}, {"tensors", tensors}});
  }
  return {{"gradsync_profile", profile_schema_version}, {"model", p.name}, {"layers", layers}};
}

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

/// Writes `j` to `path`; std::runtime_error naming the file when it cannot.
inline void write_json(const nlohmann::json& j, const std::string& path, int indent = -1) {
  std::ofstream out(path);
  out << j.dump(indent) << "\n";
  if (!out) throw std::runtime_error(path + ": cannot write");
}

}  // namespace gradsync::sim
