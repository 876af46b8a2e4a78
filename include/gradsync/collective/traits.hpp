#pragma once
/// collective::Traits: what a collective is, declared by the collective itself and read through
/// its traits() (the Collective concept asks for it): which codecs it can carry, whether it holds
/// back parts of units, and where the units it aggregates may live.
///
/// A collective declares them as
///   static constexpr Traits traits() { return {.through_codec = true}; }
/// and a collective chosen at run time (AnyCollective) answers with the chosen one's.
///
/// \code
///   static_assert(gradsync::collective::Ring::traits().through_codec);
///   gradsync::collective::AnyCollective::parse("dgt").traits().holds_back;  // true
/// \endcode
#include <concepts>
#include <optional>
#include <string_view>
#include <type_traits>

namespace gradsync::collective {

struct Traits {
  /// It sums fp32 values in a vendor library (MPI's, NCCL's, Gloo's all-reduce) or sends them as
  /// they are, so it needs a lossless codec (collective::Accepts, check_accepts).
  bool needs_lossless_codec = false;
  /// Why, in the error that refuses a lossy codec ("collective 'dgt' sends its blocks as raw fp32").
  std::string_view lossless_because = "sums fp32 values in a vendor library";
  /// It holds back parts of a unit for later (blocks dropped on the way) in Job::ctx.residual, so
  /// the Synchronizer gives every unit a residual.
  bool holds_back = false;
  /// It touches a unit only through its codec: encode, decode, decode_add and the mean's
  /// codec::divide (collective/wire.hpp, detail::finish_mean with the codec), so a codec that keeps
  /// units in device memory (codec::DeviceCodec) can aggregate them there. The vendor all-reduces
  /// (MPI, Gloo) read the floats themselves.
  bool through_codec = false;
  /// It aggregates units that live in GPU memory itself, with any lossless codec (the NCCL ones).
  bool device_memory = false;
};

/// Whether collective type K declares its traits as the concept asks (a traits() that returns Traits).
template <class K>
concept DeclaresTraits = requires(const K k) {
  { k.traits() } -> std::same_as<Traits>;
};

/// Whether collective type K spells a property as a member of its own (holds_back, through_codec,
/// needs_lossless_codec, lossless_because, device_memory, accepts_device_memory: a function, a
/// constant or a field), which nothing reads: its traits() is what counts, so such a member would
/// be silently ignored. GRADSYNC_CHECK_COLLECTIVE refuses it.
template <class K>
concept SpellsTraitsOutside = requires { &K::holds_back; } || requires { &K::through_codec; } ||
                              requires { &K::needs_lossless_codec; } || requires { &K::lossless_because; } ||
                              requires { &K::device_memory; } || requires { &K::accepts_device_memory; };

/// K's traits when its type fixes them (every concrete collective: a static constexpr traits());
/// nullopt for a collective chosen at run time (AnyCollective).
template <DeclaresTraits K>
inline constexpr std::optional<Traits> static_traits = [] {
  if constexpr (requires { typename std::bool_constant<(K::traits(), true)>; }) return std::optional<Traits>(K::traits());
  else return std::optional<Traits>();
}();

}  // namespace gradsync::collective
