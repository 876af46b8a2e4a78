#pragma once
/// ModuleOrder: what the attachment learns from a model's first iteration - the order in which
/// modules first start their forward, so each parameter's optimizer step can wait until its module
/// runs again, and the iteration's timings (FirstIteration) for Config::choose. LibTorch-free: the
/// model is a tree of modules owning parameters by index.
///
/// \code
///   ModuleOrder order(model_modules, parameter_count, trainable);  // trainable: indices, ascending
///   order.forward_started(m);          // at each module's forward, first iteration
///   order.gradient_arrived(p);         // at each parameter's gradient, first iteration
///   ModuleOrder::Steps steps = order.steps();       // steps.order: this rank's layout order
///   FirstIteration f = order.first_iteration(layout_order);
/// \endcode
///
/// A parameter belongs to the first module that owns it directly and runs (tied parameters: the
/// first of their modules), else to the nearest running ancestor of its owner (a child used only
/// through its parent's forward, like nn.MultiheadAttention's out_proj).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace gradsync::torch {

/// A module of the model's tree.
struct ModuleNode {
  std::string name;
  std::ptrdiff_t parent = -1;      ///< index of an earlier module; -1: the root
  std::vector<std::size_t> owned;  ///< parameters it holds directly (indices into the model's)
};

/// The first iteration's compute as the hooks saw it (its first forward and backward pass). Rough:
/// the first iteration is also the warm-up, and a module's forward time is what passed until the
/// next module's forward pre-hook (a container's own is about 0; functional code between modules
/// counts for the module before it).
struct FirstIteration {
  struct Layer {
    std::string name;
    double forward_seconds = 0;   ///< from its forward pre-hook to the next module's
    double backward_seconds = 0;  ///< from the previous gradient (or the last pre-hook) to its parameters' last
    std::vector<std::size_t> tensors;  ///< its parameters' positions in the layout
  };
  /// Modules in the order their forward ran; parameters of modules that did not run last, without times.
  std::vector<Layer> layers;
};

class ModuleOrder {
 public:
  using clock = std::chrono::steady_clock;

  /// Where each trainable parameter's optimizer step goes.
  struct Steps {
    /// Trainable parameters by their module's place in the forward order (parameters of modules
    /// that did not run last), ties in index order: this rank's layout order.
    std::vector<std::size_t> order;
    std::vector<std::vector<std::size_t>> by_module;  ///< per module: the parameters its forward steps
    std::vector<std::size_t> unhooked;                ///< those no module's forward steps
  };

  /// `trainable`: the parameters to order (indices below `parameters`, ascending).
  ModuleOrder(std::vector<ModuleNode> modules, std::size_t parameters, std::vector<std::size_t> trainable)
      : modules_(std::move(modules)), parameters_(parameters), trainable_(std::move(trainable)),
        position_(modules_.size(), none), first_gradient_(parameters) {
    check_tree();
    if (!std::ranges::is_sorted(trainable_) || (!trainable_.empty() && trainable_.back() >= parameters_))
      throw UsageError("gradsync: trainable parameters must be ascending indices below " + std::to_string(parameters_));
  }

  std::size_t modules() const { return modules_.size(); }
  /// Refuses an index that names no module (before_forward's argument).
  void check_module(std::size_t m) const {
    if (m >= modules_.size())
      throw UsageError("gradsync: before_forward(" + std::to_string(m) + "): the model has " +
                       std::to_string(modules_.size()) + " modules");
  }

  /// Module m's forward starts; the first time places it in the order.
  void forward_started(std::size_t m, clock::time_point at = clock::now()) {
    check_module(m);
    if (position_[m] != none) return;
    position_[m] = started_.size();
    started_.push_back({m, at});
  }
  /// Parameter p's gradient arrived; the first one counts.
  void gradient_arrived(std::size_t p, clock::time_point at = clock::now()) {
    if (!first_gradient_.at(p)) first_gradient_[p] = at;
  }

  /// From what was recorded so far. Throws when there is no trainable parameter.
  Steps steps() const {
    if (trainable_.empty()) throw UsageError("gradsync: the model has no trainable parameter");
    const std::vector<std::size_t> place = places();
    Steps s{trainable_, std::vector<std::vector<std::size_t>>(modules_.size()), {}};
    for (std::size_t p : trainable_)
      (place[p] == none ? s.unhooked : s.by_module[started_[place[p]].module]).push_back(p);
    std::ranges::stable_sort(s.order, {}, [&](std::size_t p) { return place[p]; });
    return s;
  }

  /// The timings per module that ran, with each parameter's position in `layout_order` (the
  /// trainable parameters in the layout's order: rank 0's steps().order).
  FirstIteration first_iteration(std::span<const std::size_t> layout_order) const {
    const std::vector<std::size_t> place = places();
    std::vector<std::size_t> layer_of(parameters_, none);
    for (std::size_t i = 0; i < layout_order.size(); ++i) layer_of.at(layout_order[i]) = i;
    FirstIteration f;
    for (std::size_t k = 0; k < started_.size(); ++k)
      f.layers.push_back({modules_[started_[k].module].name,
                          k + 1 < started_.size() ? seconds(started_[k].at, started_[k + 1].at) : 0.0, 0.0, {}});
    FirstIteration::Layer did_not_run{"(modules whose forward did not run)", 0, 0, {}};
    for (std::size_t p : trainable_) (place[p] == none ? did_not_run : f.layers[place[p]]).tensors.push_back(layer_of[p]);
    for (auto& l : f.layers) std::ranges::sort(l.tensors);
    add_backward_seconds(f, place);
    if (!did_not_run.tensors.empty()) f.layers.push_back(std::move(did_not_run));
    return f;
  }

 private:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  struct Start {
    std::size_t module;
    clock::time_point at;
  };

  static double seconds(clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

  void check_tree() const {
    for (std::size_t m = 0; m < modules_.size(); ++m) {
      const ModuleNode& node = modules_[m];
      if (node.parent < -1 || node.parent >= static_cast<std::ptrdiff_t>(m))
        throw UsageError("gradsync: module " + std::to_string(m) + " ('" + node.name + "') has parent " +
                         std::to_string(node.parent) + "; a module's parent is an earlier module, or -1 for the root");
      for (std::size_t p : node.owned)
        if (p >= parameters_)
          throw UsageError("gradsync: module " + std::to_string(m) + " ('" + node.name + "') owns parameter " +
                           std::to_string(p) + "; the model has " + std::to_string(parameters_) + " parameters");
    }
  }

  /// Per parameter: its module's place in the forward order (none: no module of its ran).
  std::vector<std::size_t> places() const {
    std::vector<std::size_t> place(parameters_, none);
    for (std::size_t m = 0; m < modules_.size(); ++m)
      for (std::size_t p : modules_[m].owned) {
        std::ptrdiff_t up = static_cast<std::ptrdiff_t>(m);
        while (up >= 0 && position_[up] == none) up = modules_[up].parent;
        if (up >= 0) place[p] = std::min(place[p], position_[up]);
      }
    return place;
  }

  /// Backward: each first gradient's time since the one before (the first: since the last forward
  /// start) goes to its module's layer.
  void add_backward_seconds(FirstIteration& f, const std::vector<std::size_t>& place) const {
    std::vector<std::pair<clock::time_point, std::size_t>> gradients;
    for (std::size_t p : trainable_)
      if (first_gradient_[p] && place[p] != none) gradients.emplace_back(*first_gradient_[p], p);
    std::ranges::sort(gradients);
    auto before = started_.empty() ? clock::time_point() : started_.back().at;
    for (const auto& [at, p] : gradients) {
      if (before != clock::time_point()) f.layers[place[p]].backward_seconds += std::max(0.0, seconds(before, at));
      before = at;
    }
  }

  std::vector<ModuleNode> modules_;
  std::size_t parameters_;
  std::vector<std::size_t> trainable_;
  std::vector<std::size_t> position_;  ///< per module: its place in started_ (none: not started)
  std::vector<Start> started_;         ///< modules in the order their forward first started
  std::vector<std::optional<clock::time_point>> first_gradient_;  ///< per parameter
};

}  // namespace gradsync::torch
