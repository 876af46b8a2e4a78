#pragma once
/// UnitTable: what a Synchronizer knows of each unit and layer — the static plan (which layers a
/// unit carries, whether it goes as fp32, where its error-feedback residual lives) and the state
/// of the current iteration (which layers are handed over, which units are ready, which are done).
///
/// \code
///   schedule::UnitTable table(layout, slicing.plan(layout), bypass_threshold, codec.traits().needs_residual,
///                             slicing.describe());  // named in the error for a plan that misses a layer
///   table.hand_over(layer, grad, iteration, [&](std::uint32_t u) { /* unit u is ready */ });
///   table.complete(u);                 // after its collective: layers' remaining counts drop
///   table.layer_done(layer);           // no unit of the layer in flight
/// \endcode
///
/// A unit is ready in an iteration once all the layers it carries are handed over; a layer is done
/// once all the units carrying it are aggregated. Counters are atomics: gradient_ready runs on the
/// caller's thread while executors complete units.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../core/unit.hpp"

namespace gradsync::schedule {

class UnitTable {
 public:
  using clock = std::chrono::steady_clock;

  /// `fp32_below`: units carrying only tensors with fewer elements go as fp32 (codec/bypass.hpp);
  /// `residuals`: keep an error-feedback residual for every other unit.
  UnitTable(const ModelLayout& layout, std::vector<Unit> units, std::size_t fp32_below, bool residuals,
            const std::string& slicing)
      : units_(std::move(units)), layers_(layout.num_layers()), state_(units_.size()), bypassed_(units_.size(), 0) {
    std::vector<std::size_t> covered(layout.num_layers(), 0);
    std::size_t residual = 0;
    for (std::uint32_t u = 0; u < units_.size(); ++u) {
      max_elements_ = std::max(max_elements_, units_[u].elements);
      for (const Segment& s : units_[u].segments) {
        layers_.at(s.layer).units.push_back(u);
        covered[s.layer] += s.length;
      }
      // The study's rule is about tensors: a unit goes as fp32 when every tensor it carries is small.
      bypassed_[u] = std::ranges::all_of(units_[u].segments,
                                         [&](const Segment& s) { return layout.layer(s.layer).elements < fp32_below; });
      state_[u].pending.store(static_cast<int>(units_[u].segments.size()));
      state_[u].residual_offset = residual;
      if (residuals && !bypassed_[u]) residual += units_[u].elements;
    }
    for (std::size_t l = 0; l < covered.size(); ++l)
      if (covered[l] != layout.layer(l).elements)
        throw UsageError("gradsync: slicing '" + slicing + "' covers " + std::to_string(covered[l]) + " of the " +
                         std::to_string(layout.layer(l).elements) + " elements of layer " + std::to_string(l));
    residual_.assign(residual, 0.0f);
  }

  const std::vector<Unit>& units() const { return units_; }
  const Unit& unit(std::uint32_t u) const { return units_[u]; }
  std::size_t size() const { return units_.size(); }
  std::size_t layers() const { return layers_.size(); }
  std::size_t max_elements() const { return max_elements_; }
  /// Each unit's elements, in unit order (what a collective's start() is told).
  std::vector<std::size_t> elements() const {
    std::vector<std::size_t> e;
    for (const Unit& u : units_) e.push_back(u.elements);
    return e;
  }
  bool bypassed(std::uint32_t u) const { return bypassed_[u] != 0; }

  /// Unit u's error-feedback residual (empty for bypassed units, or a codec without residual).
  std::span<float> residual(std::uint32_t u) {
    if (residual_.empty() || bypassed(u)) return {};
    return std::span(residual_).subspan(state_[u].residual_offset, units_[u].elements);
  }
  /// Every residual back to back in unit order: a checkpoint's codec state.
  std::span<const float> residuals() const { return residual_; }
  std::span<float> residuals() { return residual_; }

  // ---- the current iteration ----

  /// The iteration of the layer's latest hand-over (-1: never).
  std::int64_t submitted(std::size_t layer) const { return layers_[layer].submitted.load(); }
  bool layer_done(std::size_t layer) const { return layers_[layer].remaining.load() == 0; }
  bool all_done() const {
    return std::ranges::all_of(layers_, [](const Layer& l) { return l.remaining.load() == 0; });
  }
  /// The span the caller handed over for `layer`'s segment `s`.
  std::span<float> span(const Segment& s) const { return layers_[s.layer].grad.subspan(s.offset, s.length); }

  /// Records `layer`'s gradient of `iteration` and calls ready(u) for each unit it completes. The
  /// layer must be done with its previous iteration.
  template <class Ready>
  void hand_over(std::size_t layer, std::span<float> grad, std::int64_t iteration, Ready&& ready) {
    Layer& l = layers_[layer];
    l.grad = grad;
    l.remaining.store(static_cast<int>(l.units.size()));
    l.submitted.store(iteration);
    for (std::uint32_t u : l.units) {
      State& s = state_[u];
      if (s.pending.fetch_sub(1) != 1) continue;
      s.pending.store(static_cast<int>(units_[u].segments.size()));
      s.ready_at.store(clock::now());
      s.ready_iteration.store(iteration);
      ready(u);
    }
  }
  /// The iteration in which unit u last became ready (-1: never), and when.
  std::int64_t ready_iteration(std::uint32_t u) const { return state_[u].ready_iteration.load(); }
  clock::time_point ready_at(std::uint32_t u) const { return state_[u].ready_at.load(); }
  /// Unit u is aggregated: its layers have one unit fewer in flight. True when that was the last
  /// unit of one of them (a layer is done now).
  bool complete(std::uint32_t u) {
    bool layer_done = false;
    for (const Segment& g : units_[u].segments) layer_done |= layers_[g.layer].remaining.fetch_sub(1) == 1;
    return layer_done;
  }

 private:
  struct Layer {
    std::vector<std::uint32_t> units;  // units carrying part of this layer
    std::span<float> grad;
    std::atomic<std::int64_t> submitted{-1};  // iteration of the latest hand-over
    std::atomic<int> remaining{0};            // its units not yet aggregated
  };
  struct State {
    std::atomic<int> pending{0};                    // layers still to hand over this iteration
    std::atomic<std::int64_t> ready_iteration{-1};  // iteration in which the unit became ready
    std::atomic<clock::time_point> ready_at{};      // read by the watchdog's thread too
    std::size_t residual_offset = 0;
  };

  std::vector<Unit> units_;
  std::vector<Layer> layers_;
  std::vector<State> state_;
  std::vector<char> bypassed_;
  std::vector<float> residual_;
  std::size_t max_elements_ = 0;
};

}  // namespace gradsync::schedule
