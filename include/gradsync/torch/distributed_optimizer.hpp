#pragma once
/// gradsync::torch::DistributedOptimizer<Sync>: data-parallel training of a LibTorch model
/// (torch::nn::Module) with any torch::optim optimizer but LBFGS, over any Transport.
///
/// \code
///   #include <gradsync/torch/distributed_optimizer.hpp>   // target gradsync::torch
///   gradsync::transport::MpiSession mpi(argc, argv);
///   gradsync::transport::Mpi transport;
///   auto net = std::make_shared<Net>();
///   torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
///   gradsync::torch::DistributedOptimizer<> opt(transport, *net, sgd, {.policies = gradsync::AnySynchronizer::parse(
///                                               {"fixed:40000", "forward", "fp32", "ring"})});
///   net->sync = &opt;   // Net::forward calls opt.before_forward(*conv1) ... or x = opt.forward(conv1, x)
///   for (...) { loss(net->forward(x), y).backward(); opt.step(); opt.zero_grad(); }
///   opt.synchronize();  // every step applied: evaluate, save
/// \endcode
///
/// LibTorch modules have no forward hooks: a module's forward calls before_forward(module) for
/// each submodule that owns parameters (or runs it through forward(holder, args...)), which waits
/// only for that module's gradients and steps the optimizer for them, so communication overlaps
/// the next forward pass. Modules that never call it have their parameters stepped in step(),
/// after waiting for them (no overlap, still correct). The rest is Attachment's
/// (torch/attachment.hpp): rank 0's weights at construction, the forward order of the first
/// iteration as the layout, gradients handed over from autograd hooks, gradient accumulation,
/// frozen, tied and unused parameters.
///
/// \tparam Sync  gradsync::AnySynchronizer (policies by name), or a Synchronizer<...>
#include <torch/nn/module.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../any_synchronizer.hpp"
#include "attachment.hpp"

namespace gradsync::torch {

template <class Sync = AnySynchronizer>
class DistributedOptimizer {
 public:
  using Config = typename Attachment<Sync>::Config;

  /// `model` and `optimizer` must outlive this object; the optimizer may hold only the model's
  /// parameters (a subset is fine). Every rank constructs it at the same point.
  DistributedOptimizer(transport::Transport& transport, ::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer,
                       Config config = {})
      : optimizer_(optimizer), attachment_(transport, describe(model), std::move(config),
                                           {.step = [this](std::span<const std::size_t> p) { step_parameters(p); },
                                            .finished = [this] { save_hyperparameters(); }}) {}

  /// At the start of `module`'s forward: its parameters' aggregate, then their optimizer step.
  void before_forward(const ::torch::nn::Module& module) {
    const auto it = modules_.find(&module);
    if (it == modules_.end())
      throw UsageError("gradsync: before_forward(" + module.name() + "): not a module of the model given to "
                       "DistributedOptimizer");
    attachment_.before_forward(it->second);
  }
  /// before_forward(*holder), then holder(args...): `x = opt.forward(conv1, x);`.
  template <class Holder, class... Args>
  decltype(auto) forward(Holder& holder, Args&&... args) {
    before_forward(*holder);
    return holder(std::forward<Args>(args)...);
  }

  /// Ends the iteration (Attachment::step): returns at once; the optimizer steps come before each
  /// module's next forward pass.
  void step() { attachment_.step(); }
  /// Zeroes each gradient after its pending step; set_to_none defaults as torch::optim does.
  void zero_grad(bool set_to_none = compat::zero_grad_sets_to_none) { attachment_.zero_grad(set_to_none); }
  /// After backward: the mean gradients in .grad(); after step(): every step applied.
  void synchronize() { attachment_.synchronize(); }
  void abort(const std::string& reason) { attachment_.abort(reason); }
  Statistics stats() const { return attachment_.stats(); }
  const Attachment<Sync>& attachment() const { return attachment_; }

 private:
  /// The model as Attachment sees it; fills modules_, params_ and group_of_.
  Model describe(::torch::nn::Module& model) {
    if (dynamic_cast<::torch::optim::LBFGS*>(&optimizer_))
      throw UsageError("gradsync: LBFGS steps all parameters at once with a closure that re-evaluates the model; "
                       "gradsync steps each module's parameters before its forward pass: use another optimizer");
    Model m;
    std::unordered_map<const void*, std::size_t> index;  // TensorImpl -> parameter (tied ones once)
    for (const auto& p : model.named_parameters())
      if (index.emplace(p.value().unsafeGetTensorImpl(), m.parameters.size()).second)
        m.parameters.push_back({p.key(), p.value()});
    std::unordered_map<const void*, bool> seen_buffer;
    for (const auto& b : model.named_buffers())
      if (seen_buffer.emplace(b.value().unsafeGetTensorImpl(), true).second) m.buffers.emplace_back(b.key(), b.value());
    std::vector<std::pair<std::string, const ::torch::nn::Module*>> modules{{"", &model}};
    for (const auto& sub : model.named_modules("", /*include_self=*/false))
      if (modules_.find(sub.value().get()) == modules_.end()) {
        modules_.emplace(sub.value().get(), modules.size());
        modules.emplace_back(sub.key(), sub.value().get());
      }
    modules_.emplace(&model, 0);
    std::map<std::string, std::ptrdiff_t> by_name;
    for (std::size_t i = 0; i < modules.size(); ++i) by_name.emplace(modules[i].first, static_cast<std::ptrdiff_t>(i));
    for (const auto& [name, module] : modules) {
      ModuleNode node{name};
      if (!name.empty()) {
        const auto dot = name.rfind('.');
        node.parent = by_name.at(dot == std::string::npos ? std::string() : name.substr(0, dot));
      }
      for (const auto& p : module->named_parameters(/*recurse=*/false)) node.owned.push_back(index.at(p.value().unsafeGetTensorImpl()));
      m.modules.push_back(std::move(node));
    }
    group_of_.assign(m.parameters.size(), -1);
    const auto& groups = optimizer_.param_groups();
    for (std::size_t g = 0; g < groups.size(); ++g)
      for (const at::Tensor& p : groups[g].params()) {
        const auto it = index.find(p.unsafeGetTensorImpl());
        if (it == index.end())
          throw UsageError("gradsync: the optimizer holds a tensor in param group " + std::to_string(g) +
                           " that is not a parameter of the model; gradsync aggregates the model's gradients only: "
                           "give the optimizer the model's parameters");
        group_of_[it->second] = static_cast<int>(g);
      }
    for (std::size_t p = 0; p < m.parameters.size(); ++p) {
      m.parameters[p].optimized = group_of_[p] >= 0;
      params_.push_back(m.parameters[p].tensor);
    }
    save_hyperparameters();
    return m;
  }

  /// The hyperparameters (a scheduler may change them after step()) the steps still to come use.
  void save_hyperparameters() {
    hyper_.clear();
    for (const auto& g : optimizer_.param_groups()) hyper_.push_back(g.options().clone());
  }

  /// The optimizer's own step with its groups narrowed to `params` and the saved hyperparameters:
  /// its state ends up as if it stepped every parameter at once.
  void step_parameters(std::span<const std::size_t> params) {
    auto& groups = optimizer_.param_groups();
    std::vector<std::vector<at::Tensor>> subsets(groups.size());
    for (std::size_t p : params) subsets[static_cast<std::size_t>(group_of_[p])].push_back(params_[p]);
    struct Narrowed {
      std::vector<::torch::optim::OptimizerParamGroup>& groups;
      std::vector<std::vector<at::Tensor>> params;
      std::vector<std::unique_ptr<::torch::optim::OptimizerOptions>> options;
      ~Narrowed() {
        for (std::size_t g = 0; g < options.size(); ++g) {
          groups[g].params() = std::move(params[g]);
          groups[g].set_options(std::move(options[g]));
        }
      }
    } narrowed{groups, {}, {}};
    for (std::size_t g = 0; g < groups.size(); ++g) {
      narrowed.params.push_back(std::exchange(groups[g].params(), std::move(subsets[g])));
      narrowed.options.push_back(groups[g].options().clone());
      groups[g].set_options(hyper_[g]->clone());
    }
    optimizer_.step();
  }

  ::torch::optim::Optimizer& optimizer_;
  std::unordered_map<const ::torch::nn::Module*, std::size_t> modules_;
  std::vector<at::Tensor> params_;
  std::vector<int> group_of_;  ///< per parameter: its optimizer param group, -1 for none
  std::vector<std::unique_ptr<::torch::optim::OptimizerOptions>> hyper_;
  Attachment<Sync> attachment_;  // last: its hooks call the members above
};

}  // namespace gradsync::torch
