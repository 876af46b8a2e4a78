#pragma once
/// A codec's name with every knob that differs from its default, in AnyCodec::parse's grammar:
/// what the synchronizer's handshake and checkpoints compare, so ranks that differ in any knob
/// are told.
///
/// \code
///   gradsync::codec::describe(gradsync::codec::Qsgd<8>{.bucket = 1024});  // "qsgd8:bucket=1024"
/// \endcode
#include <charconv>
#include <string>
#include <variant>

#include "bypass.hpp"

namespace gradsync::codec {

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

/// "qsgd8:bucket=1024:bypass=0". A codec with knobs of its own gives a describe().
template <class C>
std::string describe(const C& c) {
  if constexpr (requires { c.describe(); }) return c.describe();
  else if constexpr (requires { c.variant(); }) return std::visit([](const auto& x) { return describe(x); }, c.variant());
  else if constexpr (requires { c.inner; }) return std::string(c.name()) + knobs(c.inner);
  else return std::string(c.name()) + knobs(c);
}

}  // namespace gradsync::codec
