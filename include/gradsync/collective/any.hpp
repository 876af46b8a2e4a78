#pragma once
/// AnyCollective: "ring" or "ps", chosen at run time.
#include <variant>

#include "../detail/parse.hpp"
#include "parameter_server.hpp"
#include "ring.hpp"

namespace gradsync::collective {

struct AnyCollective {
  std::variant<Ring, ParameterServer> policy;

  static AnyCollective parse(std::string_view text) {
    if (text == "ring") return {Ring{}};
    if (text == "ps") return {ParameterServer{}};
    gradsync::detail::bad_policy("collective", text, "ring, ps");
  }
  std::string_view name() const {
    return std::visit([](const auto& p) { return p.name(); }, policy);
  }
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& c, Job& job, Workspace& ws) const {
    return std::visit([&](const auto& p) { return p.run(t, c, job, ws); }, policy);
  }
};
GRADSYNC_CHECK_COLLECTIVE(AnyCollective);

}  // namespace gradsync::collective
