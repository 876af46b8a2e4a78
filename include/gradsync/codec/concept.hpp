#pragma once
/// The Codec concept: how one unit of gradients is put on the wire.
///
/// A codec is a small object (its knobs are members with the papers' defaults). It must be
/// usable from several threads at once through a const reference: per-unit state such as an
/// error-feedback residual lives with the Synchronizer and is passed in EncodeContext.
///
/// \code
///   gradsync::codec::Identity c;
///   std::vector<std::byte> wire(c.encoded_bytes(grad.size()));
///   c.encode(grad, wire, {});          // header + payload
///   c.decode_add(wire, sum);           // sum += decoded, validates the header first
/// \endcode
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "traits.hpp"

namespace gradsync::codec {

/// Everything an encode may depend on besides the data itself.
struct EncodeContext {
  std::uint64_t seed = 0;       ///< run seed: stochastic codecs key their counter-based RNG on it
  std::uint64_t iteration = 0;  ///< training iteration
  std::uint64_t unit = 0;       ///< unit index within the iteration
  std::uint32_t stream = 0;     ///< which encode of this unit (collective step), for the RNG key
  /// Error-feedback memory of this unit, same length as the input; empty when the codec does not
  /// need one (traits().needs_residual == false) or when the data is not this rank's own gradient.
  std::span<float> residual{};
};

// clang-format off
template <class C>
concept Codec = std::copy_constructible<C> &&
  requires(const C c, std::span<const float> in, std::span<std::byte> out,
           std::span<const std::byte> wire, std::span<float> acc, const EncodeContext& ctx,
           std::size_t n) {
    { c.name() } -> std::convertible_to<std::string_view>;   // "fp32", "qsgd8", ...
    { c.traits() } -> std::same_as<Traits>;                  // what it is (codec/traits.hpp)
    { c.encoded_bytes(n) } -> std::same_as<std::size_t>;     // exact wire size for n elements
    { c.encode(in, out, ctx) } -> std::same_as<std::size_t>; // writes header + payload, returns bytes
    { c.decode(wire, acc) };                                 // acc = decoded (validates, throws WireError)
    { c.decode_add(wire, acc) };                             // acc += decoded (validates, throws WireError)
  };
// clang-format on

/// Use in a static_assert so a wrong codec gets a message that says what is missing: first its
/// traits, which every codec declares, then the rest of the interface.
#define GRADSYNC_CHECK_CODEC(C)                                                                   \
  static_assert(::gradsync::codec::DeclaresTraits<C>,                                             \
                "gradsync: this codec does not declare its traits: add "                          \
                "static constexpr gradsync::codec::Traits traits() { return {.lossless = ..., "   \
                ".needs_residual = ...}; } (or a constexpr const member when they depend on its " \
                "knobs); see gradsync/codec/traits.hpp");                                         \
  static_assert(!::gradsync::codec::SpellsTraitsOutside<C>,                                       \
                "gradsync: this codec has a member lossless or needs_residual, which nothing "    \
                "reads: declare it in its traits() instead (gradsync::codec::Traits)");           \
  static_assert(::gradsync::codec::Codec<C>,                                                      \
                "gradsync: this type is not a Codec: provide const member functions name(), "     \
                "traits(), encoded_bytes(n), encode(in, out, ctx) -> size_t, decode(wire, out) "  \
                "and decode_add(wire, acc); see gradsync/codec/concept.hpp")

}  // namespace gradsync::codec
