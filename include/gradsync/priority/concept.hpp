#pragma once
/// The Priority concept: gives each unit a key; key 0 is the most urgent. The schedule keeps one
/// lane per key and always serves the lowest non-empty key (FIFO within a key).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "../core/layout.hpp"
#include "../core/unit.hpp"

namespace gradsync::priority {

// clang-format off
template <class P>
concept Priority = std::copy_constructible<P> &&
  requires(const P p, const ModelLayout& layout, const std::vector<Unit>& units, const Unit& u) {
    { p.levels(layout) } -> std::same_as<std::size_t>;  // number of distinct keys (lanes)
    { p.key(u) } -> std::same_as<std::uint32_t>;        // < levels(layout); 0 = most urgent
    { p.name() } -> std::convertible_to<std::string_view>;
  };
// clang-format on

/// A priority whose keys depend on the training also observes every unit's
/// aggregated gradient — the same bytes on every rank, so every rank keys alike — and keys a unit
/// by its index too:
///   void observe(std::uint32_t index, const Unit& u, std::span<const float> aggregate);
///   std::uint32_t key(std::uint32_t index, const Unit& u) const;
/// The Synchronizer calls observe on the executor that aggregated unit `index`, before the unit
/// counts as done (so concurrently for different units, never for one unit twice at once), and
/// asks key(index, u) each time the unit becomes ready; every lane can then hold every unit.
// clang-format off
template <class P>
concept ObservingPriority = Priority<P> &&
  requires(P p, const P cp, std::uint32_t index, const Unit& u, std::span<const float> aggregate) {
    { p.observe(index, u, aggregate) };
    { cp.key(index, u) } -> std::same_as<std::uint32_t>;
  };
// clang-format on

/// Whether `p`'s keys may change between iterations (an ObservingPriority whose key depends on
/// what it observed); a priority that only observes for another purpose says rekeys() == false.
template <class P>
bool rekeys(const P& p) {
  if constexpr (!ObservingPriority<P>) return false;
  else if constexpr (requires { p.rekeys(); }) return p.rekeys();
  else return true;
}

/// Unit `index`'s key under `p` now.
template <class P>
std::uint32_t key_of(const P& p, std::uint32_t index, const Unit& u) {
  if constexpr (ObservingPriority<P>) return p.key(index, u);
  else return p.key(u);
}

/// Strict ordering of keys (never <=: P3's released queue had that bug, which breaks ties unfairly).
constexpr bool more_urgent(std::uint32_t a, std::uint32_t b) { return a < b; }

#define GRADSYNC_CHECK_PRIORITY(P)                                                              \
  static_assert(::gradsync::priority::Priority<P>,                                              \
                "gradsync: this type is not a Priority policy: provide const member functions " \
                "levels(const ModelLayout&) -> std::size_t, key(const Unit&) -> std::uint32_t " \
                "and name(); see gradsync/priority/concept.hpp")

}  // namespace gradsync::priority
