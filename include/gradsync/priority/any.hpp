#pragma once
/// AnyPriority: "fifo" or "forward", chosen at run time.
#include <variant>

#include "../detail/parse.hpp"
#include "fifo.hpp"
#include "forward_order.hpp"

namespace gradsync::priority {

struct AnyPriority {
  std::variant<ForwardOrder, Fifo> policy;

  static AnyPriority parse(std::string_view text) {
    if (text == "forward") return {ForwardOrder{}};
    if (text == "fifo") return {Fifo{}};
    gradsync::detail::bad_policy("priority", text, "fifo, forward");
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
};
GRADSYNC_CHECK_PRIORITY(AnyPriority);

}  // namespace gradsync::priority
