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

/// A priority that also classifies each unit's blocks of block_elements() as important or not
/// (DGT's Contribution): important blocks travel reliably, the others best-effort. It learns from
/// every unit's block magnitudes (collective::Job::magnitudes: per block, the mean over ranks of
/// each rank's mean |v|, v its gradient plus residual, which magnitudes() computes), the same on
/// every rank, so every rank classifies alike; the Synchronizer calls observe_blocks after each
/// unit's collective. It may answer classifies() at run time (AnyPriority: only when DGT was chosen).
// clang-format off
template <class P>
concept ClassifyingPriority = Priority<P> &&
  requires(P p, const P cp, std::uint32_t index, float loss_ratio, std::vector<std::uint8_t>& important,
           std::span<const float> magnitudes) {
    { cp.classify(index, loss_ratio, important) };
    { cp.block_elements() } -> std::convertible_to<std::uint32_t>;
    { cp.magnitudes(magnitudes, magnitudes, std::span<float>{}) };  // this rank's, of gradient and residual
    { p.observe_blocks(index, magnitudes) };
  };
// clang-format on

/// Whether `p` classifies blocks (see ClassifyingPriority).
template <class P>
bool classifies(const P& p) {
  if constexpr (!ClassifyingPriority<P>) return false;
  else if constexpr (requires { p.classifies(); }) return p.classifies();
  else return true;
}

/// Calls p.prepare(units) when the priority has it (state sized per unit, once, at construction).
template <class P>
void prepare(P& p, const std::vector<Unit>& units) {
  if constexpr (requires { p.prepare(units); }) p.prepare(units);
}

/// Checkpoints: what a priority learned from the training (DGT's contributions), as floats, so a
/// resumed run keys and classifies as the interrupted one would have; none for the static ones.
/// save_state writes state_size(p) values; load_state reads them into a prepared priority.
template <class P>
std::size_t state_size(const P& p) {
  if constexpr (requires { p.state_size(); }) return p.state_size();
  else return 0;
}
template <class P>
void save_state(const P& p, std::span<float> out) {
  if constexpr (requires { p.save_state(out); }) p.save_state(out);
}
template <class P>
void load_state(P& p, std::span<const float> in) {
  if constexpr (requires { p.load_state(in); }) p.load_state(in);
}

#define GRADSYNC_CHECK_PRIORITY(P)                                                              \
  static_assert(::gradsync::priority::Priority<P>,                                              \
                "gradsync: this type is not a Priority policy: provide const member functions " \
                "levels(const ModelLayout&) -> std::size_t, key(const Unit&) -> std::uint32_t " \
                "and name(); see gradsync/priority/concept.hpp")

}  // namespace gradsync::priority
