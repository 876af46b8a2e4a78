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
/// before_forward. A parameter belongs to the first module that owns it directly and runs (tied
/// parameters: the first of their modules), else to the nearest running ancestor of its owner (a
/// child used only through its parent's forward, like nn.MultiheadAttention's out_proj). The
/// layout is the parameters in that order - rank 0's order, told to every rank - and the
/// Synchronizer is built at the first step(). Construction checks the ranks' models agree and
/// copies rank 0's parameters and buffers to every rank. The hooks also time the first iteration
/// (FirstIteration), so Config::choose may pick the policies by the model's compute before the
/// Synchronizer is built (gradsync.torch's slicing "auto" runs the tuner on it).
///
/// Used from one thread (the one running forward and backward), like the model itself.
///
/// \tparam Sync  a Synchronizer<...> or AnySynchronizer
#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../core/options.hpp"
#include "compat.hpp"
#include "model_check.hpp"

namespace gradsync::torch {

/// A model as the adapter sees it.
struct Model {
  struct Parameter {
    std::string name;
    at::Tensor tensor;
    bool optimized = true;  ///< in the optimizer (zero_grad and the step apply to it)
  };
  struct Module {
    std::string name;
    std::ptrdiff_t parent = -1;        ///< index into modules; -1: the root
    std::vector<std::size_t> owned;    ///< parameters it holds directly (indices into parameters)
  };
  std::vector<Parameter> parameters;  ///< each once (tied ones under their first name)
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  std::vector<Module> modules;
};

/// What the adapter asks of the optimizer.
struct OptimizerHooks {
  /// Steps the optimizer for these parameters (indices into Model::parameters) only, with the
  /// hyperparameters `finished` saw. Required.
  std::function<void(std::span<const std::size_t>)> step;
  /// Called when an iteration's gradients are all handed over: save the hyperparameters (a
  /// learning rate a scheduler changes after step()) that this iteration's steps must use.
  std::function<void()> finished;
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

template <class Sync>
class Attachment {
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
  };

  Attachment(transport::Transport& t, Model model, Config config, OptimizerHooks optimizer)
      : t_(t), model_(std::move(model)), config_(std::move(config)), optimizer_(std::move(optimizer)),
        slots_(model_.parameters.size()), self_(std::make_shared<Attachment*>(this)),
        fired_at_(model_.modules.size(), unfired) {
    if (!optimizer_.step) throw UsageError("gradsync: Attachment needs OptimizerHooks::step");
    if (config_.backward_passes == 0) throw UsageError("gradsync: backward_passes_per_step must be at least 1");
    for (std::size_t p = 0; p < slots_.size(); ++p) slots_[p].trainable = check_parameter(p);
    check_same_model(t_, describe_model());
    copy_from_rank0();
    for (std::size_t p = 0; p < slots_.size(); ++p)
      if (slots_[p].trainable) attach_hooks(p);
  }
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  /// The hooks stay on the autograd graph (a graph built before may still hold them) but do nothing.
  ~Attachment() { *self_ = nullptr; }

  /// Call at the start of module `m`'s forward (an index into Model::modules): waits for the
  /// aggregate of its parameters' gradients and steps the optimizer for them.
  void before_forward(std::size_t m) {
    if (m >= model_.modules.size())
      throw UsageError("gradsync: before_forward(" + std::to_string(m) + "): the model has " +
                       std::to_string(model_.modules.size()) + " modules");
    if (!sync_) {
      if (fired_at_[m] == unfired) {
        fired_at_[m] = fired_.size();
        fired_.push_back(m);
        fired_time_.push_back(clock::now());
      }
      return;
    }
    if (!groups_[m].empty()) complete(groups_[m]);
  }

  /// Ends the iteration: hands over every trainable parameter's gradient not yet handed over (a
  /// parameter without one: zeros; if no rank had one, its .grad stays undefined after the
  /// aggregate, as DDP leaves it) and returns. The optimizer steps come later (before_forward).
  void step() {
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
  }

  /// Zeroes the optimized parameters' gradients (set_to_none: makes them undefined), each right
  /// after its optimizer step where that is still to come.
  void zero_grad(bool set_to_none = false) {
    for (std::size_t p = 0; p < slots_.size(); ++p) {
      Slot& s = slots_[p];
      if (!model_.parameters[p].optimized) continue;
      if (s.handed)
        throw UsageError("gradsync: zero_grad() between backward() and step() would discard gradients in flight "
                         "(parameter '" + name(p) + "'); call it before the forward pass or after step()");
      if (s.pending) s.zero = set_to_none ? Zero::reset : Zero::fill;
      else clear_grad(p, set_to_none ? Zero::reset : Zero::fill);
    }
  }

  /// Lands everything in flight. After backward (before step()): ends the iteration and waits, so
  /// every .grad holds the mean (clip it, then call step()). After step(): every optimizer step
  /// is applied (evaluate, checkpoint, read the weights).
  void synchronize() {
    if (open_) {
      finish();
      sync_->wait_all();
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
  using clock = std::chrono::steady_clock;
  enum class Zero : std::uint8_t { none, fill, reset };
  struct Slot {
    bool trainable = false;
    std::uint32_t layer = 0;  ///< in the layout (trainable ones)
    unsigned passes = 0;      ///< gradients accumulated this iteration
    bool handed = false;      ///< handed over this iteration
    bool pending = false;     ///< its optimizer step (of the last finished iteration) is still to come
    bool made_grad = false;   ///< it had no gradient: step() made zeros
    /// The .grad handed over, held until its step: the aggregate is written into its memory, and
    /// the step needs it even if .grad was set to None meanwhile.
    at::Tensor handed_grad;
    std::int64_t handed_version = 0;  ///< handed_grad's version counter then: a change means in-place edits
    bool landed = false;              ///< its aggregate is in handed_grad and was checked
    std::optional<clock::time_point> first_gradient;  ///< in the first iteration's first backward pass
    Zero zero = Zero::none;   ///< zero_grad() asked, to do after the pending step
  };
  static constexpr std::size_t unfired = std::numeric_limits<std::size_t>::max();

  const std::string& name(std::size_t p) const { return model_.parameters[p].name; }

  // ---- construction ----

  /// Whether parameter p is trained (and so aggregated); refuses what gradsync cannot aggregate.
  bool check_parameter(std::size_t p) const {
    const at::Tensor& w = model_.parameters[p].tensor;
    if (!w.requires_grad() || w.numel() == 0) return false;
    if (w.scalar_type() != at::kFloat)
      throw UsageError("gradsync: parameter '" + name(p) + "' is " + std::string(at::toString(w.scalar_type())) +
                       "; gradsync aggregates float32 gradients: convert the model with .float(), or freeze the "
                       "parameter (requires_grad=False)");
    if (!w.device().is_cpu())
      throw UsageError("gradsync: parameter '" + name(p) + "' is on " + w.device().str() +
                       "; gradsync's PyTorch adapter aggregates host (CPU) tensors");
    if (w.layout() != at::kStrided || !w.is_non_overlapping_and_dense())
      throw UsageError("gradsync: parameter '" + name(p) + "' is not a dense tensor; gradsync aggregates dense "
                       "gradients");
    return true;
  }

  std::vector<std::string> describe_model() const {
    std::vector<std::string> lines;
    auto line = [&](const char* kind, const std::string& n, const at::Tensor& t, const char* extra) {
      std::ostringstream s;
      s << kind << " '" << n << "' " << t.sizes() << " strides " << t.strides() << ' ' << t.scalar_type() << extra;
      lines.push_back(s.str());
    };
    for (std::size_t p = 0; p < slots_.size(); ++p)
      line("parameter", name(p), model_.parameters[p].tensor, slots_[p].trainable ? "" : " (not trained)");
    for (const auto& [n, b] : model_.buffers) line("buffer", n, b, "");
    return lines;
  }

  /// Rank 0's parameters and buffers on every rank, as DDP does at start.
  void copy_from_rank0() {
    if (t_.size() == 1) return;
    at::NoGradGuard no_grad;
    auto copy = [&](const at::Tensor& x) {
      if (!x.device().is_cpu()) throw UsageError("gradsync: a tensor of the model is on " + x.device().str() +
                                                 "; gradsync's PyTorch adapter works on host (CPU) tensors");
      const bool in_place = x.is_non_overlapping_and_dense();
      at::Tensor data = in_place ? x : x.contiguous();
      broadcast_into(t_, std::span(static_cast<std::byte*>(data.data_ptr()), data.nbytes()));
      if (!in_place) x.copy_(data);
    };
    for (const auto& p : model_.parameters) copy(p.tensor);
    for (const auto& b : model_.buffers) copy(b.second);
  }

  // ---- autograd hooks ----

  struct BeforeAccumulation final : ::torch::autograd::FunctionPreHook {
    BeforeAccumulation(std::shared_ptr<Attachment*> self, std::size_t p) : self(std::move(self)), p(p) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& grads) override {
      if (Attachment* a = *self) a->before_accumulation(p);
      return grads;
    }
    std::shared_ptr<Attachment*> self;
    std::size_t p;
  };
  struct AfterAccumulation final : ::torch::autograd::FunctionPostHook {
    AfterAccumulation(std::shared_ptr<Attachment*> self, std::size_t p) : self(std::move(self)), p(p) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                                const ::torch::autograd::variable_list&) override {
      if (Attachment* a = *self) a->after_accumulation(p);
      return outputs;
    }
    std::shared_ptr<Attachment*> self;
    std::size_t p;
  };

  void attach_hooks(std::size_t p) {
    // The tensor holds its accumulator weakly: keep it, or the next graph gets a new one without hooks.
    compat::Accumulator acc = compat::grad_accumulator(model_.parameters[p].tensor);
    acc->add_pre_hook(std::make_unique<BeforeAccumulation>(self_, p));
    acc->add_post_hook(std::make_unique<AfterAccumulation>(self_, p));
    accumulators_.push_back(std::move(acc));
  }

  /// A gradient arrives while the last one's step is still to come (its module did not run
  /// forward): step now, before the new gradient is added to the aggregate.
  void before_accumulation(std::size_t p) {
    if (slots_[p].pending) complete(std::span(&p, 1));
  }

  void after_accumulation(std::size_t p) {
    Slot& s = slots_[p];
    if (s.handed)
      throw UsageError("gradsync: parameter '" + name(p) + "' got another gradient after this step's was handed "
                       "over: backward ran more than backward_passes_per_step (" +
                       std::to_string(config_.backward_passes) + ") times before step(); pass the number of "
                       "backward passes you accumulate, or call step() after each");
    open_ = true;
    check_gradient(p);
    if (!sync_ && !s.first_gradient) s.first_gradient = clock::now();
    if (++s.passes == config_.backward_passes && sync_) hand_over(p);
  }

  void check_gradient(std::size_t p) const {
    const at::Tensor& g = model_.parameters[p].tensor.grad();
    if (g.is_sparse())
      throw UsageError("gradsync: parameter '" + name(p) + "' got a sparse gradient; gradsync aggregates dense "
                       "gradients: build the layer with sparse=False (nn.Embedding(..., sparse=False))");
    if (g.scalar_type() != at::kFloat)
      throw UsageError("gradsync: parameter '" + name(p) + "' got a " + std::string(at::toString(g.scalar_type())) +
                       " gradient; gradsync aggregates float32 gradients: keep the parameter float32");
    if (!g.device().is_cpu() || g.layout() != at::kStrided || !g.is_non_overlapping_and_dense() ||
        !same_order(g, model_.parameters[p].tensor))
      throw UsageError("gradsync: parameter '" + name(p) + "' got a gradient that is not a dense host tensor laid "
                       "out like the parameter; gradsync aggregates those only");
  }

  /// Whether dense tensors `a` and `b` of one shape hold their elements in the same memory order
  /// (strides of dimensions of size 1 do not matter: autograd may give those any value).
  static bool same_order(const at::Tensor& a, const at::Tensor& b) {
    if (a.sizes() != b.sizes()) return false;
    for (std::int64_t d = 0; d < a.dim(); ++d)
      if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
    return true;
  }

  // ---- the iteration ----

  void hand_over(std::size_t p) {
    at::Tensor& g = model_.parameters[p].tensor.mutable_grad();
    Slot& s = slots_[p];
    s.handed_grad = g;
    s.handed_version = g._version();
    s.landed = false;
    sync_->gradient_ready(s.layer, std::span(g.data_ptr<float>(), static_cast<std::size_t>(g.numel())));
    s.handed = true;
  }

  /// Parameter p's aggregate has landed in the .grad it was handed over from. Refuses a .grad
  /// replaced or edited in place meanwhile (the aggregate would be lost or mixed with it); a .grad
  /// set to None (zero_grad on the model or on the wrapped optimizer: PyTorch 2's default) gets the
  /// aggregate back for the step and is set to None after it.
  void take_landed(std::size_t p) {
    Slot& s = slots_[p];
    if (!s.handed_grad.defined()) return;
    at::Tensor& g = model_.parameters[p].tensor.mutable_grad();
    if (!g.defined()) {
      g = s.handed_grad;
      if (s.zero == Zero::none) s.zero = Zero::reset;
    } else if (!s.landed && (!g.is_same(s.handed_grad) || g._version() != s.handed_version)) {
      throw UsageError("gradsync: parameter '" + name(p) + "': its .grad was changed while gradsync was aggregating "
                       "it (zeroed in place or replaced), so the aggregate would be lost; zero gradients with the "
                       "DistributedOptimizer's zero_grad() (not the model's or the wrapped optimizer's), and edit "
                       ".grad (clipping, unscaling) only after synchronize()");
    }
    s.landed = true;
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
        check_gradient(p);
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
    for (std::size_t p : todo) sync_->wait_for(slots_[p].layer);
    for (std::size_t p : todo) take_landed(p);
    for (std::size_t p : todo)
      if (slots_[p].made_grad && all_zero(model_.parameters[p].tensor.grad()))
        model_.parameters[p].tensor.mutable_grad().reset();  // no rank had a gradient: none, as DDP leaves it
    std::vector<std::size_t> stepped;
    for (std::size_t p : todo)
      if (model_.parameters[p].optimized) stepped.push_back(p);
    if (!stepped.empty()) optimizer_.step(stepped);
    for (std::size_t p : todo) {
      Slot& s = slots_[p];
      clear_grad(p, s.zero);
      s.zero = Zero::none;
      s.pending = false;
      s.made_grad = false;
      s.handed_grad.reset();
    }
  }

  void clear_grad(std::size_t p, Zero how) {
    at::Tensor& g = model_.parameters[p].tensor.mutable_grad();
    if (!g.defined() || how == Zero::none) return;
    if (how == Zero::reset) g.reset();
    else g.zero_();
  }

  static bool all_zero(const at::Tensor& g) {
    const float* x = g.data_ptr<float>();
    return std::all_of(x, x + g.numel(), [](float v) { return v == 0.0f; });
  }

  /// The first step(): the forward order, the layout (rank 0's order), the Synchronizer.
  void build() {
    const std::size_t n = model_.parameters.size();
    // Each parameter's module: the earliest-running of its owners, or of their nearest running ancestors.
    std::vector<std::size_t> rank_of(n, unfired);
    for (std::size_t m = 0; m < model_.modules.size(); ++m)
      for (std::size_t p : model_.modules[m].owned) {
        std::ptrdiff_t up = static_cast<std::ptrdiff_t>(m);
        while (up >= 0 && fired_at_[up] == unfired) up = model_.modules[up].parent;
        if (up >= 0) rank_of[p] = std::min(rank_of[p], fired_at_[up]);
      }
    groups_.assign(model_.modules.size(), {});
    std::vector<std::size_t> order;
    for (std::size_t p = 0; p < n; ++p)
      if (slots_[p].trainable) {
        order.push_back(p);
        trainable_.push_back(p);
        if (rank_of[p] == unfired) unhooked_.push_back(p);
        else groups_[fired_[rank_of[p]]].push_back(p);
      }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank_of[a] < rank_of[b]; });
    if (order.empty()) throw UsageError("gradsync: the model has no trainable parameter");
    // Rank 0's order on every rank (the ranks agree which parameters are trained: check_same_model).
    std::vector<std::byte> bytes(order.size() * sizeof(std::uint32_t));
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto p = static_cast<std::uint32_t>(order[i]);
      std::memcpy(bytes.data() + i * sizeof p, &p, sizeof p);
    }
    broadcast(t_, bytes);
    std::vector<LayerSpec> specs;
    for (std::size_t i = 0; i < order.size(); ++i) {
      std::uint32_t p = 0;
      std::memcpy(&p, bytes.data() + i * sizeof p, sizeof p);
      layout_order_.push_back(p);
      slots_[p].layer = static_cast<std::uint32_t>(i);
      specs.push_back({name(p), static_cast<std::size_t>(model_.parameters[p].tensor.numel())});
    }
    ModelLayout layout(std::move(specs));
    if (config_.choose) config_.choose(t_, first_iteration(rank_of), layout, config_.policies, config_.options);
    sync_ = std::make_unique<Sync>(t_, std::move(layout), config_.options, std::move(config_.policies));
  }

  /// The first iteration's timings per module that ran (`position`: each parameter's module's
  /// place in the forward order, unfired for none).
  FirstIteration first_iteration(const std::vector<std::size_t>& position) const {
    const auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    FirstIteration f;
    for (std::size_t k = 0; k < fired_.size(); ++k)
      f.layers.push_back({model_.modules[fired_[k]].name,
                          k + 1 < fired_.size() ? seconds(fired_time_[k], fired_time_[k + 1]) : 0.0, 0.0, {}});
    FirstIteration::Layer unfired_layer{"(modules whose forward did not run)", 0, 0, {}};
    for (std::size_t p : trainable_)
      (position[p] == unfired ? unfired_layer : f.layers[position[p]]).tensors.push_back(slots_[p].layer);
    for (auto& l : f.layers) std::ranges::sort(l.tensors);
    if (!unfired_layer.tensors.empty()) f.layers.push_back(std::move(unfired_layer));
    // Backward: each gradient's time since the one before goes to its module's layer.
    std::vector<std::pair<clock::time_point, std::size_t>> gradients;
    for (std::size_t p : trainable_)
      if (slots_[p].first_gradient && position[p] != unfired) gradients.emplace_back(*slots_[p].first_gradient, p);
    std::ranges::sort(gradients);
    auto before = fired_time_.empty() ? clock::time_point() : fired_time_.back();
    for (const auto& [at, p] : gradients) {
      if (before != clock::time_point()) f.layers[position[p]].backward_seconds += std::max(0.0, seconds(before, at));
      before = at;
    }
    return f;
  }

  transport::Transport& t_;
  Model model_;
  Config config_;
  OptimizerHooks optimizer_;
  std::vector<Slot> slots_;
  std::shared_ptr<Attachment*> self_;  // the hooks' way back here; null once destroyed
  std::vector<compat::Accumulator> accumulators_;
  // The forward order of the first iteration: modules as they first ran, and each one's position.
  std::vector<std::size_t> fired_, fired_at_;
  std::vector<clock::time_point> fired_time_;  ///< when each of fired_ first ran
  std::vector<std::vector<std::size_t>> groups_;  ///< per module: the parameters its forward steps
  std::vector<std::size_t> trainable_, unhooked_, layout_order_;
  std::unique_ptr<Sync> sync_;
  bool open_ = false;            ///< a gradient arrived since the last step()
  bool finished_early_ = false;  ///< synchronize() ended this iteration before step()
  bool first_step_ = true;
};

}  // namespace gradsync::torch
