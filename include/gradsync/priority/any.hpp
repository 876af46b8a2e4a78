#pragma once
/// AnyPriority: a priority chosen at run time from a string.
///
///   "fifo"                                   Fifo (wait-free backprop)
///   "forward"                                ForwardOrder (P3)
/// DGT is a collective: AnyCollective's "dgt[:...]" (collective/differential_ps.hpp).
#include <string>
#include <variant>

#include "../detail/parse.hpp"
#include "fifo.hpp"
#include "forward_order.hpp"

namespace gradsync::priority {

struct AnyPriority {
  std::variant<ForwardOrder, Fifo> policy;

  /// The policy strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar = "fifo, forward";

  static AnyPriority parse(std::string_view text) {
    if (text == "forward") return {ForwardOrder{}};
    if (text == "fifo") return {Fifo{}};
    if (gradsync::detail::split_policy(text).name == "dgt")  // the spelling before it became a collective
      throw ConfigError("gradsync: priority '" + std::string(text) + "' is now collective '" + std::string(text) +
                        "' (differential transmission over the parameter server): use priority 'forward' and "
                        "collective 'dgt[:alpha=A][:p0=P][:block=N]' instead of collective 'ps'");
    gradsync::detail::bad_policy("priority", text, grammar);
  }

  std::size_t levels(const ModelLayout& l) const {
    return std::visit([&](const auto& p) { return p.levels(l); }, policy);
  }
  std::uint32_t key(const Unit& u) const {
    return std::visit([&](const auto& p) { return p.key(u); }, policy);
  }
  std::string_view name() const {
    return std::visit([](const auto& p) { return p.name(); }, policy);
  }
  /// The name with the knobs, as the handshake compares it.
  std::string describe() const {
    return std::visit([](const auto& p) { return gradsync::detail::describe_policy(p); }, policy);
  }
};
GRADSYNC_CHECK_PRIORITY(AnyPriority);

}  // namespace gradsync::priority
