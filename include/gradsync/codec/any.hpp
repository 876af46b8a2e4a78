#pragma once
/// AnyCodec: a codec chosen at run time from a string ("fp32").
#include <variant>

#include "../detail/parse.hpp"
#include "identity.hpp"

namespace gradsync::codec {

struct AnyCodec {
  std::variant<Identity> policy;

  static AnyCodec parse(std::string_view text) {
    if (text == "fp32" || text == "identity") return {Identity{}};
    gradsync::detail::bad_policy("codec", text, "fp32");
  }
  template <class F>
  decltype(auto) visit(F&& f) const { return std::visit(std::forward<F>(f), policy); }

  std::string_view name() const { return visit([](const auto& c) { return c.name(); }); }
  bool lossless() const { return visit([](const auto& c) { return c.lossless(); }); }
  bool summable() const { return visit([](const auto& c) { return c.summable(); }); }
  bool needs_residual() const { return visit([](const auto& c) { return c.needs_residual(); }); }
  std::size_t encoded_bytes(std::size_t n) const { return visit([&](const auto& c) { return c.encoded_bytes(n); }); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext& ctx) const {
    return visit([&](const auto& c) { return c.encode(in, out, ctx); });
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const {
    visit([&](const auto& c) { c.decode(wire, out); });
  }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {
    visit([&](const auto& c) { c.decode_add(wire, acc); });
  }
};
GRADSYNC_CHECK_CODEC(AnyCodec);

}  // namespace gradsync::codec
