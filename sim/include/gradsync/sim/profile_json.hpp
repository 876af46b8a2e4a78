#pragma once
/// Model profiles in JSON (schema version 1, tools/sim/README.md): what gradsync-sim reads and
/// `gradsync-train --profile` writes. The one header of gradsync::sim that needs nlohmann_json.
///
/// \code
///   gradsync::sim::Profile p = gradsync::sim::read_profile("vgg11.json");   // ConfigError on bad input
///   nlohmann::json j = gradsync::sim::profile_json(p);                         // the same schema
/// \endcode
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include <gradsync/core/error.hpp>
#include "profile.hpp"

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
  if (j.contains("iteration_seconds")) {
    const nlohmann::json& v = j["iteration_seconds"];
    if (!v.is_array()) throw fail("iteration_seconds", "expected an array of seconds (one rank's compute per iteration)");
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number() || !(v[i].get<double>() > 0))
        throw fail("iteration_seconds[" + std::to_string(i) + "]", "expected seconds as a number > 0, got " + v[i].dump());
      p.iteration_seconds.push_back(v[i].get<double>());
    }
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
  nlohmann::json j = {{"gradsync_profile", profile_schema_version}, {"model", p.name}, {"layers", layers}};
  if (!p.iteration_seconds.empty()) j["iteration_seconds"] = p.iteration_seconds;
  return j;
}

/// Writes `j` to `path`; std::runtime_error naming the file when it cannot.
inline void write_json(const nlohmann::json& j, const std::string& path, int indent = -1) {
  std::ofstream out(path);
  out << j.dump(indent) << "\n";
  if (!out) throw std::runtime_error(path + ": cannot write");
}

}  // namespace gradsync::sim
