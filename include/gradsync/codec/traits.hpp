#pragma once
/// What collectives and the Synchronizer ask of any codec besides the Codec concept, answered
/// for runtime codecs (AnyCodec) and wrappers (ErrorFeedback) too.
///
/// \code
///   gradsync::codec::grain(gradsync::codec::Qsgd<8>{});          // 512: cut units at multiples of it
///   gradsync::codec::bypass_below(gradsync::codec::OneBit{});    // bypass_auto (codec/bypass.hpp)
///   gradsync::codec::describe(gradsync::codec::Qsgd<8>{.bucket = 1024});  // "qsgd8:bucket=1024"
///   static_assert(gradsync::codec::static_lossless<gradsync::codec::Identity> == true);
/// \endcode
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "bypass.hpp"

namespace gradsync::codec {

/// Elements that share one scale (QSGD's and 1-bit's bucket); 1 for element-wise codecs. A
/// collective that cuts a unit into pieces cuts at multiples of it, so every piece is bucketed as
/// the whole unit would be (no short buckets in the middle, one scale per bucket of the unit).
template <class C>
std::size_t grain(const C& c) {
  if constexpr (requires { c.variant(); }) return std::visit([](const auto& x) { return grain(x); }, c.variant());
  else if constexpr (requires { c.inner; }) return grain(c.inner);
  else if constexpr (requires { c.bucket; }) return c.bucket > 0 ? c.bucket : 1;
  else return 1;
}

/// Whether codec type C is lossless, when C says so at compile time (every concrete codec: its
/// lossless() is constexpr); nullopt for a codec chosen at run time (AnyCodec).
template <class C>
inline constexpr std::optional<bool> static_lossless = [] {
  if constexpr (requires { typename std::bool_constant<C{}.lossless()>; }) return std::optional<bool>(C{}.lossless());
  else return std::optional<bool>();
}();

/// A codec's `bypass_below` knob: tensors with fewer elements go as fp32 (codec/bypass.hpp).
/// 0 for codecs without one (lossless ones: there is nothing to bypass).
template <class C>
std::uint32_t bypass_below(const C& c) {
  if constexpr (requires { c.variant(); }) return std::visit([](const auto& x) { return bypass_below(x); }, c.variant());
  else if constexpr (requires { c.inner; }) return bypass_below(c.inner);
  else if constexpr (requires { c.bypass_below; }) return c.bypass_below;
  else return 0;
}

/// A codec's knobs that differ from their defaults, in AnyCodec::parse's grammar (":bucket=1024").
template <class C>
std::string knobs(const C& c) {
  const C d{};
  std::string s;
  if constexpr (requires { c.bucket; })
    if (c.bucket != d.bucket) s += ":bucket=" + std::to_string(c.bucket);
  if constexpr (requires { c.norm; })
    if (c.norm != d.norm) s += ":norm=" + std::string(norm_text(c.norm));  // (found with the codec's type)
  if constexpr (requires { c.ratio; })
    if (c.ratio != d.ratio) {
      char text[32];  // the shortest text that reads back as the same float
      s += ":ratio=" + std::string(text, std::to_chars(text, text + sizeof text, c.ratio).ptr);
    }
  if constexpr (requires { c.bypass_below; })
    if (c.bypass_below != d.bypass_below)
      s += ":bypass=" + (c.bypass_below == bypass_auto ? std::string("auto") : std::to_string(c.bypass_below));
  return s;
}

/// A codec's name with every knob that differs from its default, in AnyCodec::parse's grammar
/// ("qsgd8:bucket=1024:bypass=0"): what the synchronizer's handshake and checkpoints compare, so
/// ranks that differ in any knob are told. A codec with knobs of its own gives a describe().
template <class C>
std::string describe(const C& c) {
  if constexpr (requires { c.describe(); }) return c.describe();
  else if constexpr (requires { c.variant(); }) return std::visit([](const auto& x) { return describe(x); }, c.variant());
  else if constexpr (requires { c.inner; }) return std::string(c.name()) + knobs(c.inner);
  else return std::string(c.name()) + knobs(c);
}

}  // namespace gradsync::codec
