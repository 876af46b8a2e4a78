#pragma once
/// codec::Traits: what a codec is, declared by the codec itself and read through its traits()
/// (the Codec concept asks for it): whether it loses precision, whether it keeps an
/// error-feedback residual, the grain collectives cut its units at and its bypass knob.
///
/// A codec declares them in one of two forms:
///   static constexpr Traits traits() { return {.lossless = true}; }         // fixed by its type
///   constexpr Traits traits() const { return {.grain = bucket, .bypass_below = bypass_below}; }
///                                                                            // with its knobs
/// A codec chosen at run time (AnyCodec) answers with the chosen codec's traits, and wrappers
/// (ErrorFeedback, OnDevice) with their inner codec's.
///
/// \code
///   gradsync::codec::Qsgd<8>{}.traits().grain;         // 512: cut units at multiples of it
///   gradsync::codec::OneBit{}.traits().needs_residual;  // true: one residual per unit and rank
///   static_assert(gradsync::codec::static_lossless<gradsync::codec::Identity> == true);
/// \endcode
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace gradsync::codec {

struct Traits {
  /// decode(encode(x)) == x exactly.
  bool lossless = false;
  /// Error feedback: an encode wants the unit's residual (EncodeContext::residual), one per unit
  /// and rank, and keeps in it what the wire did not carry.
  bool needs_residual = false;
  /// Elements that share one scale (QSGD's and 1-bit's bucket); 1 for element-wise codecs. A
  /// collective that cuts a unit into pieces cuts at multiples of it, so every piece is bucketed as
  /// the whole unit would be (no short buckets in the middle, one scale per bucket of the unit).
  std::size_t grain = 1;
  /// Tensors with fewer elements go as fp32 (codec/bypass.hpp); 0 for codecs without the knob
  /// (lossless ones: there is nothing to bypass).
  std::uint32_t bypass_below = 0;
};

/// Whether codec type C declares its traits as the concept asks (a traits() that returns Traits).
template <class C>
concept DeclaresTraits = requires(const C c) {
  { c.traits() } -> std::same_as<Traits>;
};

/// Whether codec type C spells a property as a member of its own (lossless, needs_residual: a
/// function, a constant or a field), which nothing reads: its traits() is what counts, so such a
/// member would be silently ignored. GRADSYNC_CHECK_CODEC refuses it.
template <class C>
concept SpellsTraitsOutside = requires { &C::lossless; } || requires { &C::needs_residual; };

/// Whether codec type C is lossless, when a default C says so at compile time (every concrete
/// codec: its traits() is constexpr); nullopt for a codec chosen at run time (AnyCodec).
template <DeclaresTraits C>
inline constexpr std::optional<bool> static_lossless = [] {
  if constexpr (requires { typename std::bool_constant<C{}.traits().lossless>; }) return std::optional<bool>(C{}.traits().lossless);
  else return std::optional<bool>();
}();

}  // namespace gradsync::codec
