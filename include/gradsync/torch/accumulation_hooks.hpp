#pragma once
/// AccumulationHooks: a hook before and after each hooked parameter's gradient accumulation (its
/// AccumulateGrad node), calling a Listener with the parameter's index.
///
/// \code
///   AccumulationHooks hooks(listener);  // listener: before_accumulation(p), after_accumulation(p)
///   hooks.attach(weight, p);
/// \endcode
///
/// The hooks stay on the autograd graph once attached (a graph built before may still hold them);
/// after the AccumulationHooks is destroyed they call nothing.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "compat.hpp"

namespace gradsync::torch {

class AccumulationHooks {
 public:
  struct Listener {
    /// A gradient for parameter p is about to be added to its .grad.
    virtual void before_accumulation(std::size_t p) = 0;
    /// Parameter p's .grad holds the gradient just added.
    virtual void after_accumulation(std::size_t p) = 0;

   protected:
    ~Listener() = default;
  };

  explicit AccumulationHooks(Listener& listener) : listener_(std::make_shared<Listener*>(&listener)) {}
  AccumulationHooks(const AccumulationHooks&) = delete;
  AccumulationHooks& operator=(const AccumulationHooks&) = delete;
  ~AccumulationHooks() { *listener_ = nullptr; }

  /// Hooks `leaf` (a parameter) as parameter p.
  void attach(const at::Tensor& leaf, std::size_t p) {
    // The tensor holds its accumulator weakly: keep it, or the next graph gets a new one without hooks.
    compat::Accumulator acc = compat::grad_accumulator(leaf);
    acc->add_pre_hook(std::make_unique<Before>(listener_, p));
    acc->add_post_hook(std::make_unique<After>(listener_, p));
    accumulators_.push_back(std::move(acc));
  }

 private:
  using Shared = std::shared_ptr<Listener*>;  // the hooks' way back; null once destroyed
  struct Before final : ::torch::autograd::FunctionPreHook {
    Before(Shared listener, std::size_t p) : listener(std::move(listener)), p(p) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& grads) override {
      if (Listener* l = *listener) l->before_accumulation(p);
      return grads;
    }
    Shared listener;
    std::size_t p;
  };
  struct After final : ::torch::autograd::FunctionPostHook {
    After(Shared listener, std::size_t p) : listener(std::move(listener)), p(p) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                                const ::torch::autograd::variable_list&) override {
      if (Listener* l = *listener) l->after_accumulation(p);
      return outputs;
    }
    Shared listener;
    std::size_t p;
  };

  Shared listener_;
  std::vector<compat::Accumulator> accumulators_;
};

}  // namespace gradsync::torch
