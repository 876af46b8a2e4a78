#pragma once
/// AnyPriority: a priority chosen at run time from a string.
///
///   "fifo"                                   Fifo (wait-free backprop)
///   "forward"                                ForwardOrder (P3)
///   "dgt[:alpha=A][:p0=P][:block=N]"         Contribution (DGT), over collective 'ps'
#include <charconv>
#include <string>
#include <variant>

#include "../detail/parse.hpp"
#include "contribution.hpp"
#include "fifo.hpp"
#include "forward_order.hpp"

namespace gradsync::priority {

struct AnyPriority {
  std::variant<ForwardOrder, Fifo, Contribution> policy;

  /// The policy strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar = "fifo, forward, dgt[:alpha=A][:p0=P][:block=N]";

  static AnyPriority parse(std::string_view text) {
    if (text == "forward") return {ForwardOrder{}};
    if (text == "fifo") return {Fifo{}};
    const auto spec = gradsync::detail::split_policy(text);
    if (spec.name != "dgt") gradsync::detail::bad_policy("priority", text, grammar);
    Contribution c;
    for (std::string_view rest = spec.arg; spec.has_arg;) {
      const auto [opt, tail, more] = gradsync::detail::split_policy(rest);
      const auto eq = opt.find('=');
      if (eq == std::string_view::npos) gradsync::detail::bad_policy("priority", text, grammar);
      const std::string_view key = opt.substr(0, eq), value = opt.substr(eq + 1);
      const char* end = value.data() + value.size();
      bool ok = false;
      if (key == "alpha") ok = std::from_chars(value.data(), end, c.alpha).ptr == end;
      else if (key == "p0") ok = std::from_chars(value.data(), end, c.p0).ptr == end;
      else if (key == "block") ok = std::from_chars(value.data(), end, c.block).ptr == end;
      if (!ok || value.empty()) gradsync::detail::bad_policy("priority", text, grammar);
      if (!more) break;
      rest = tail;
    }
    c.prepare({});  // checks the knobs now, naming them
    return {c};
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

  // Data-dependent parts: DGT only; the others ignore them.
  void prepare(const std::vector<Unit>& units) {
    std::visit([&](auto& p) { priority::prepare(p, units); }, policy);
  }
  void observe_blocks(std::uint32_t index, std::span<const float> magnitudes) {
    std::get<Contribution>(policy).observe_blocks(index, magnitudes);
  }
  void magnitudes(std::span<const float> g, std::span<const float> r, std::span<float> out) const {
    std::get<Contribution>(policy).magnitudes(g, r, out);
  }
  bool classifies() const { return std::holds_alternative<Contribution>(policy); }
  void classify(std::uint32_t index, float loss_ratio, std::vector<std::uint8_t>& important) const {
    std::get<Contribution>(policy).classify(index, loss_ratio, important);
  }
  std::size_t state_size() const {
    const auto* c = std::get_if<Contribution>(&policy);
    return c ? c->state_size() : 0;
  }
  void save_state(std::span<float> out) const {
    if (const auto* c = std::get_if<Contribution>(&policy)) c->save_state(out);
  }
  void load_state(std::span<const float> in) {
    if (auto* c = std::get_if<Contribution>(&policy)) c->load_state(in);
  }
  std::uint32_t block_elements() const {
    const auto* c = std::get_if<Contribution>(&policy);
    return c ? c->block : 0;
  }
};
GRADSYNC_CHECK_PRIORITY(AnyPriority);

}  // namespace gradsync::priority
