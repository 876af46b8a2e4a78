#pragma once
// Parsing of policy strings such as "fixed:40000" or "fusion:1MiB" for the Any... policies.
#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>

#include "../core/error.hpp"

namespace gradsync::detail {

struct PolicySpec {
  std::string_view name;
  std::string_view arg;  // empty when no ':' was given
  bool has_arg = false;
};

inline PolicySpec split_policy(std::string_view s) {
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) return {s, {}, false};
  return {s.substr(0, colon), s.substr(colon + 1), true};
}

[[noreturn]] inline void bad_policy(std::string_view family, std::string_view text, std::string_view valid) {
  throw ConfigError("gradsync: unknown or malformed " + std::string(family) + " policy '" +
                    std::string(text) + "'; valid: " + std::string(valid));
}

/// A policy's name with its knobs, as the handshake compares it: describe() where the policy has
/// one, else its name.
std::string describe_policy(const auto& p) {
  if constexpr (requires { p.describe(); }) return p.describe();
  else return std::string(p.name());
}

/// A whole number >= 1 (a group size) or bad_policy.
inline int parse_count(std::string_view text, std::string_view family, std::string_view whole, std::string_view valid) {
  int k = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
  if (ec != std::errc{} || end != text.data() + text.size() || k < 1) bad_policy(family, whole, valid);
  return k;
}

/// The collective policy strings (collective::AnyCollective; the simulator's CollectiveModel).
inline constexpr std::string_view collective_grammar =
    "ring, ps, reduce-broadcast, hierarchical[:k], hybrid[:bytes[:k]], mpi, gloo[:iface], nccl, nccl-hierarchical[:k], "
    "dgt[:alpha=A][:p0=P][:block=N] (k: ranks per group, bytes: e.g. 256KiB)";

/// A positive count with an optional suffix: k/M/G (x1000) or KiB/MiB/GiB (x1024).
inline std::size_t parse_size(std::string_view text, std::string_view family, std::string_view whole,
                              std::string_view valid) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || v == 0) bad_policy(family, whole, valid);
  const std::string_view suffix(end, text.data() + text.size() - end);
  std::size_t mult = 1;
  if (suffix.empty()) mult = 1;
  else if (suffix == "k") mult = 1000;
  else if (suffix == "M") mult = 1000'000;
  else if (suffix == "G") mult = 1000'000'000;
  else if (suffix == "KiB") mult = 1u << 10;
  else if (suffix == "MiB") mult = 1u << 20;
  else if (suffix == "GiB") mult = 1u << 30;
  else bad_policy(family, whole, valid);
  return v * mult;
}

}  // namespace gradsync::detail
