#pragma once
/// The Slicing concept: turns a ModelLayout into transmission units.
#include <concepts>
#include <string>
#include <vector>

#include "../core/layout.hpp"
#include "../core/unit.hpp"

namespace gradsync::slicing {

// clang-format off
template <class S>
concept Slicing = std::copy_constructible<S> && requires(const S s, const ModelLayout& layout) {
  { s.plan(layout) } -> std::same_as<std::vector<Unit>>;  // every element of every layer exactly once
  { s.describe() } -> std::convertible_to<std::string>;   // "fixed:40000", used in the rank handshake
};
// clang-format on

#define GRADSYNC_CHECK_SLICING(S)                                                               \
  static_assert(::gradsync::slicing::Slicing<S>,                                                \
                "gradsync: this type is not a Slicing policy: provide const member functions "  \
                "plan(const ModelLayout&) -> std::vector<Unit> and describe() -> std::string; " \
                "see gradsync/slicing/concept.hpp")

}  // namespace gradsync::slicing
