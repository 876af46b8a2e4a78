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

#define GRADSYNC_CHECK_PRIORITY(P)                                                              \
  static_assert(::gradsync::priority::Priority<P>,                                              \
                "gradsync: this type is not a Priority policy: provide const member functions " \
                "levels(const ModelLayout&) -> std::size_t, key(const Unit&) -> std::uint32_t " \
                "and name(); see gradsync/priority/concept.hpp")

}  // namespace gradsync::priority
