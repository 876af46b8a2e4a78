#pragma once
/// collective::Spec: a collective policy string, parsed. The grammar's one owner: AnyCollective
/// builds its collective from a Spec, and the simulator's CollectiveModel its cost model, without
/// including each other (this header includes no collective).
///
/// \code
///   const auto s = gradsync::collective::Spec::parse("hybrid:1MiB:4");
///   // s.kind == Spec::Kind::hybrid, *s.threshold_bytes == 1 << 20, s.group == 4
/// \endcode
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "../detail/parse.hpp"

namespace gradsync::collective {

struct Spec {
  enum class Kind { ring, ps, reduce_broadcast, hierarchical, hybrid, mpi, gloo, nccl, nccl_hierarchical, dgt };
  Kind kind = Kind::ring;
  int group = 0;                               ///< hierarchical, hybrid, nccl-hierarchical: ranks per group (0: automatic)
  std::optional<std::size_t> threshold_bytes;  ///< hybrid: fp32 bytes from which the ring is used, if given
  std::string iface;                           ///< gloo: the network interface (empty: Gloo's choice)

  /// The policy strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar =
      "ring, ps, reduce-broadcast, hierarchical[:k], hybrid[:bytes[:k]], mpi, gloo[:iface], nccl, nccl-hierarchical[:k], "
      "dgt[:alpha=A][:p0=P][:block=N] (k: ranks per group, bytes: e.g. 256KiB)";

  /// The spec of `text`, or ConfigError naming it and the grammar.
  static Spec parse(std::string_view text) {
    const auto [name, arg, has_arg] = gradsync::detail::split_policy(text);
    auto group_of = [&](std::string_view s) { return gradsync::detail::parse_count(s, "collective", text, grammar); };
    Spec s;
    if (!has_arg && name == "ring") s.kind = Kind::ring;
    else if (!has_arg && name == "ps") s.kind = Kind::ps;
    else if (!has_arg && name == "reduce-broadcast") s.kind = Kind::reduce_broadcast;
    else if (!has_arg && name == "mpi") s.kind = Kind::mpi;
    else if (!has_arg && name == "nccl") s.kind = Kind::nccl;
    else if (name == "hierarchical" || name == "nccl-hierarchical") {
      s.kind = name == "hierarchical" ? Kind::hierarchical : Kind::nccl_hierarchical;
      if (has_arg) s.group = group_of(arg);
    } else if (name == "hybrid") {
      s.kind = Kind::hybrid;
      if (has_arg) {
        const auto [bytes, k, has_k] = gradsync::detail::split_policy(arg);
        s.threshold_bytes = gradsync::detail::parse_size(bytes, "collective", text, grammar);
        if (has_k) s.group = group_of(k);
      }
    } else if (name == "dgt") {
      s.kind = Kind::dgt;  // its knobs: DifferentialPs::parse
    } else if (name == "gloo") {
      s.kind = Kind::gloo;
      s.iface = std::string(arg);
    } else {
      gradsync::detail::bad_policy("collective", text, grammar);
    }
    return s;
  }
};

}  // namespace gradsync::collective
