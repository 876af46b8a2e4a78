#pragma once
/// Attachment<Sync>: a Synchronizer attached to a PyTorch model through autograd - what the
/// LibTorch frontend (torch/distributed_optimizer.hpp) and the Python package (gradsync.torch)
/// share. It sees the model as tensors and a module tree, and the optimizer as a callback.
///
/// \code
///   Attachment<AnySynchronizer> a(transport, model, {.policies = ...},
///                                 {.step = [&](std::span<const std::size_t> params) { ... }});
///   for (...) {
///     // every module's forward starts with a.before_forward(module index)
///     loss.backward();            // each parameter's gradient goes out the moment it is final
///     a.step();                   // the rest (unused parameters: zeros), then the iteration ends
///     a.zero_grad();              // done after each parameter's optimizer step
///   }
///   a.synchronize();              // every step applied: evaluate, checkpoint
/// \endcode
///
/// How. A hook after each trainable parameter's gradient accumulation (the AccumulateGrad node)
/// hands the gradient over once it is final (after `backward_passes` backward passes). step()
/// hands over the rest and ends the iteration, but steps nothing: before a module's forward,
/// before_forward waits only for the units of that module's parameters, then the optimizer steps
/// them (the `step` callback), so communication overlaps the next forward pass. Nothing waits on
/// a parameter whose module never runs: step() applies it before handing over its next gradient,
/// and a hook before accumulation does so when a gradient arrives first.
///
/// The first iteration finds the forward order: the order in which modules first call
/// before_forward (module_order.hpp says which module's forward steps each parameter). The layout
/// is the parameters in that order - rank 0's order, told to every rank - and the Synchronizer is
/// built at the first step(). Construction refuses what gradsync cannot aggregate and checks the
/// ranks' models agree (checks.hpp), then copies rank 0's parameters and buffers to every rank
/// (rank0_copy.hpp). The hooks also time the first iteration (FirstIteration), so Config::choose
/// may pick the policies by the model's compute before the Synchronizer is built (gradsync.torch's
/// slicing "auto" runs the tuner on it). The first iteration is not the steady state (a rank may
/// have a core to itself while the others still start up), so Config::rechoose may pick again at
/// a later step() on the compute measured since (ComputeClock): that step() lands everything
/// and applies every optimizer step, as the first does, and the Synchronizer is built anew.
///
/// Used from one thread (the one running forward and backward), like the model itself.
///
/// \tparam Sync  a Synchronizer<...> or AnySynchronizer
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../core/options.hpp"
#include "accumulation_hooks.hpp"
#include "checks.hpp"
#include "compute_clock.hpp"
#include "model.hpp"
#include "module_order.hpp"
#include "parameter_slot.hpp"
#include "rank0_copy.hpp"

namespace gradsync::torch {

/// What the adapter asks of the optimizer.
struct OptimizerHooks {
  /// Steps the optimizer for these parameters (indices into Model::parameters) only, with the
  /// hyperparameters `finished` saw. Required.
  std::function<void(std::span<const std::size_t>)> step;
  /// Called when an iteration's gradients are all handed over: save the hyperparameters (a
  /// learning rate a scheduler changes after step()) that this iteration's steps must use.
  std::function<void()> finished;
};

template <class Sync>
class Attachment final : private AccumulationHooks::Listener {
 public:
  struct Config {
    typename Sync::Policies policies{};
    Options options{};
    /// Backward passes that accumulate into one step's gradients (gradient accumulation).
    unsigned backward_passes = 1;
    /// Called on every rank at the first step(), with the layout (rank 0's order) and the first
    /// iteration's timings, before the Synchronizer is built: may change the policies and the
    /// options. Every rank must end with the same (the handshake checks): ask rank 0 over `t`.
    std::function<void(transport::Transport& t, const FirstIteration&, const ModelLayout&,
                       typename Sync::Policies&, Options&)>
        choose;
    /// With rechoose: the step() that ends this many iterations lands everything, calls it on
    /// every rank with this rank's compute per iteration since the second (seconds outside the
    /// Synchronizer's waits, from one step() to the next) and builds the Synchronizer anew from
    /// what it leaves. The same agreement as choose.
    std::size_t steady_after = 0;
    std::function<void(transport::Transport& t, std::span<const double> compute_seconds, typename Sync::Policies&,
                       Options&)>
        rechoose;
  };

  Attachment(transport::Transport& t, Model model, Config config, OptimizerHooks optimizer)
      : t_(t), model_(std::move(model)), config_(std::move(config)), optimizer_(std::move(optimizer)),
        trainable_(trainable_parameters()),
        // The module tree moves into order_: nothing else here needs it.
        order_(std::move(model_.modules), model_.parameters.size(), trainable_),
        slots_(model_.parameters.size()) {
    std::vector<bool> trained(slots_.size());
    for (std::size_t p : trainable_) trained[p] = slots_[p].trainable = true;
    check_models_agree(t_, model_, trained);
    copy_from_rank0(t_, model_);
    for (std::size_t p : trainable_) hooks_.attach(model_.parameters[p].tensor, p);
  }
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  /// Call at the start of module `m`'s forward (an index into Model::modules): waits for the
  /// aggregate of its parameters' gradients and steps the optimizer for them.
  void before_forward(std::size_t m) {
    order_.check_module(m);
    if (!sync_) order_.forward_started(m);
    else if (!groups_[m].empty()) complete(groups_[m]);
  }

  /// Ends the iteration: hands over every trainable parameter's gradient not yet handed over (a
  /// parameter without one: zeros; if no rank had one, its .grad stays undefined after the
  /// aggregate, as DDP leaves it) and returns. The optimizer steps come later (before_forward).
  void step() {
    if (steps_ < config_.steady_after) clock_.step();
    ++steps_;
    if (!finished_early_) finish();
    finished_early_ = false;
    for (Slot& s : slots_) {
      s.pending = s.trainable;
      s.handed = false;
      s.passes = 0;
    }
    // The first iteration steps at once (its forward ran before the layout existed), and so do
    // parameters no module's forward will step.
    complete(first_step_ ? trainable_ : unhooked_);
    first_step_ = false;
    if (config_.rechoose && steps_ == config_.steady_after) rebuild();
  }

  /// Zeroes the optimized parameters' gradients (set_to_none: makes them undefined), each right
  /// after its optimizer step where that is still to come. After synchronize() with no step()
  /// since, the mean gradients are discarded unstepped, as zeroing them without gradsync would
  /// (a GradScaler skips the step of an iteration whose gradients overflowed).
  void zero_grad(bool set_to_none = false) {
    if (finished_early_) discard_iteration();
    for (std::size_t p = 0; p < slots_.size(); ++p) {
      Slot& s = slots_[p];
      if (!model_.parameters[p].optimized) continue;
      if (s.handed)
        throw UsageError("gradsync: zero_grad() between backward() and step() would discard gradients in flight "
                         "(parameter '" + name(p) + "'); call it before the forward pass or after step()");
      if (s.pending) s.zero = set_to_none ? Zero::reset : Zero::fill;
      else Slot::clear(model_.parameters[p].tensor.mutable_grad(), set_to_none ? Zero::reset : Zero::fill);
    }
  }

  /// Lands everything in flight. After backward (before step()): ends the iteration and waits, so
  /// every .grad holds the mean (clip it, then call step()). After step(): every optimizer step
  /// is applied (evaluate, checkpoint, read the weights).
  void synchronize() {
    if (open_) {
      finish();
      const auto t0 = ComputeClock::Clock::now();
      sync_->wait_all();
      clock_.waited_since(t0);
      for (std::size_t p : trainable_) take_landed(p);
      finished_early_ = true;
    } else {
      complete(trainable_);
    }
  }

  /// Fails this rank's Synchronizer and tells every peer (call it before unwinding on an error).
  void abort(const std::string& reason) {
    if (sync_) sync_->abort(reason);
  }

  Statistics stats() const { return sync_ ? sync_->stats() : Statistics{}; }
  /// The Synchronizer, once the first step() built it (null before).
  const Sync* synchronizer() const { return sync_.get(); }
  /// Modules whose forward steps parameters (after the first step()): those to hook.
  std::vector<std::size_t> stepping_modules() const {
    std::vector<std::size_t> out;
    for (std::size_t m = 0; m < groups_.size(); ++m)
      if (!groups_[m].empty()) out.push_back(m);
    return out;
  }

 private:
  using Slot = ParameterSlot;

  const std::string& name(std::size_t p) const { return model_.parameters[p].name; }

  /// The parameters gradsync aggregates, after refusing a configuration or parameter it cannot use.
  std::vector<std::size_t> trainable_parameters() const {
    if (!optimizer_.step) throw UsageError("gradsync: Attachment needs OptimizerHooks::step");
    if (config_.backward_passes == 0) throw UsageError("gradsync: backward_passes_per_step must be at least 1");
    std::vector<std::size_t> out;
    for (std::size_t p = 0; p < model_.parameters.size(); ++p)
      if (check_parameter(name(p), model_.parameters[p].tensor)) out.push_back(p);
    return out;
  }

  // ---- autograd hooks ----

  /// A gradient arrives while the last one's step is still to come (its module did not run
  /// forward): step now, before the new gradient is added to the aggregate.
  void before_accumulation(std::size_t p) override {
    if (slots_[p].pending) complete(std::span(&p, 1));
  }

  void after_accumulation(std::size_t p) override {
    Slot& s = slots_[p];
    if (s.handed)
      throw UsageError("gradsync: parameter '" + name(p) + "' got another gradient after this step's was handed "
                       "over: backward ran more than backward_passes_per_step (" +
                       std::to_string(config_.backward_passes) + ") times before step(); pass the number of "
                       "backward passes you accumulate, or call step() after each");
    open_ = true;
    check_gradient(name(p), model_.parameters[p].tensor);
    if (!sync_) order_.gradient_arrived(p);
    if (++s.passes == config_.backward_passes && sync_) hand_over(p);
  }

  // ---- the iteration ----

  void hand_over(std::size_t p) {
    at::Tensor& g = model_.parameters[p].tensor.mutable_grad();
    Slot& s = slots_[p];
    s.hold(g);
    sync_->gradient_ready(s.layer, std::span(g.data_ptr<float>(), static_cast<std::size_t>(g.numel())));
    s.handed = true;
  }

  void take_landed(std::size_t p) { slots_[p].take_landed(model_.parameters[p].tensor.mutable_grad(), name(p)); }

  /// Ends the iteration synchronize() landed without stepping it: the next backward starts afresh.
  void discard_iteration() {
    for (std::size_t p : trainable_) {
      Slot& s = slots_[p];
      drop_made_zeros(p);
      s = Slot{.trainable = true, .layer = s.layer};
    }
    finished_early_ = false;
  }

  /// Hands over what is left and ends the iteration (no wait).
  void finish() {
    if (!sync_) build();
    // A parameter whose step is still to come and that got no gradient: its module skipped its
    // forward. Step it now: its .grad is about to be handed over again.
    std::vector<std::size_t> late;
    for (std::size_t p : trainable_)
      if (slots_[p].pending) late.push_back(p);
    complete(late);
    for (auto it = layout_order_.rbegin(); it != layout_order_.rend(); ++it) {
      const std::size_t p = *it;
      if (slots_[p].handed) continue;
      at::Tensor& w = model_.parameters[p].tensor;
      if (!w.grad().defined()) {
        w.mutable_grad() = at::zeros_like(w);
        slots_[p].made_grad = true;
      } else {
        check_gradient(name(p), w);
      }
      hand_over(p);
    }
    sync_->finish_iteration();
    if (optimizer_.finished) optimizer_.finished();
    open_ = false;
  }

  /// Waits for these parameters' aggregates (those whose step is still to come) and steps them.
  void complete(std::span<const std::size_t> params) {
    std::vector<std::size_t> todo;
    for (std::size_t p : params)
      if (slots_[p].pending) todo.push_back(p);
    if (todo.empty()) return;
    const auto t0 = ComputeClock::Clock::now();
    for (std::size_t p : todo) sync_->wait_for(slots_[p].layer);
    clock_.waited_since(t0);
    for (std::size_t p : todo) take_landed(p);
    for (std::size_t p : todo) drop_made_zeros(p);
    std::vector<std::size_t> stepped;
    for (std::size_t p : todo)
      if (model_.parameters[p].optimized) stepped.push_back(p);
    if (!stepped.empty()) optimizer_.step(stepped);
    for (std::size_t p : todo) slots_[p].stepped(model_.parameters[p].tensor.mutable_grad());
  }

  /// A parameter finish() gave zeros for that no rank had a gradient for: none, as DDP leaves it.
  void drop_made_zeros(std::size_t p) {
    if (slots_[p].made_grad && Slot::all_zero(model_.parameters[p].tensor.grad()))
      model_.parameters[p].tensor.mutable_grad().reset();
  }

  /// The first step(): the forward order, the layout (rank 0's order), the Synchronizer.
  void build() {
    ModuleOrder::Steps steps = order_.steps();
    groups_ = std::move(steps.by_module);
    unhooked_ = std::move(steps.unhooked);
    // Rank 0's order on every rank (the ranks agree which parameters are trained: check_models_agree).
    layout_order_ = rank0_order(t_, steps.order);
    std::vector<LayerSpec> specs;
    for (std::size_t i = 0; i < layout_order_.size(); ++i) {
      const std::size_t p = layout_order_[i];
      slots_[p].layer = static_cast<std::uint32_t>(i);
      specs.push_back({name(p), static_cast<std::size_t>(model_.parameters[p].tensor.numel())});
    }
    ModelLayout layout(std::move(specs));
    if (config_.choose)
      config_.choose(t_, order_.first_iteration(layout_order_), layout, config_.policies, config_.options);
    sync_ = std::make_unique<Sync>(t_, std::move(layout), config_.options, std::move(config_.policies));
  }

  /// Config::rechoose's step(): every step applied now (nothing in flight), then a new Synchronizer.
  void rebuild() {
    sync_->wait_all();
    complete(trainable_);
    const std::vector<double>& samples = clock_.samples();
    typename Sync::Policies policies{};
    Options options = config_.options;
    config_.rechoose(t_, std::span(samples).subspan(samples.empty() ? 0 : 1), policies, options);
    ModelLayout layout = sync_->layout();
    sync_.reset();  // drained: its destructor waits for nothing
    sync_ = std::make_unique<Sync>(t_, std::move(layout), options, std::move(policies));
  }

  transport::Transport& t_;
  Model model_;
  Config config_;
  OptimizerHooks optimizer_;
  std::vector<std::size_t> trainable_;  ///< the parameters aggregated, ascending
  ModuleOrder order_;                   ///< the first iteration's forward order and timings
  std::vector<Slot> slots_;
  std::vector<std::vector<std::size_t>> groups_;  ///< per module: the parameters its forward steps
  std::vector<std::size_t> unhooked_, layout_order_;
  std::unique_ptr<Sync> sync_;
  bool open_ = false;            ///< a gradient arrived since the last step()
  bool finished_early_ = false;  ///< synchronize() ended this iteration before step()
  bool first_step_ = true;
  std::size_t steps_ = 0;  ///< step() calls
  ComputeClock clock_;     ///< the compute of the iterations until Config::steady_after
  AccumulationHooks hooks_{*this};  // last: destroyed first, so no hook reaches a half-destroyed Attachment
};

}  // namespace gradsync::torch
