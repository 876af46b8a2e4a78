#pragma once
// Module: a layer or a container of layers with forward and backward.
//
// A leaf layer owns its parameters (`Param`: value, gradient, decay flag, forward-order index).
// The training step reaches the synchronizer through `StepHooks` in the `Context`:
//   forward:  Module::forward calls hooks->before_forward(own params) before the layer computes
//             (the trainer does wait_for + optimizer step there);
//   backward: each leaf calls grads_ready(ctx) the moment its parameter gradients are written,
//             before it computes the input gradient (the trainer calls gradient_ready there).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gradsync/trainer/half.hpp"
#include "gradsync/trainer/tensor.hpp"

namespace gradsync::trainer {

struct Param {
  enum class Init { zeros, ones, normal, uniform };
  std::string name;
  Tensor value, grad;
  bool decay = true;       ///< weight decay and LARS apply; false for biases and batch-norm
  std::size_t index = 0;   ///< position in the model's forward order = synchronizer layer id
  Init init = Init::zeros;
  float init_scale = 0.0f; ///< standard deviation (normal) or bound (uniform)
};

class StepHooks {
 public:
  virtual void before_forward(std::span<Param* const> params) = 0;
  virtual void after_backward(std::span<Param* const> params) = 0;

 protected:
  ~StepHooks() = default;
};

struct Context {
  bool training = false;
  StepHooks* hooks = nullptr;
  std::uint64_t seed = 0;  ///< with `step`, keys the dropout masks (counter-based, reproducible)
  std::uint64_t step = 0;
  bool half = false;       ///< mixed precision: outputs and input gradients stored as fp16 values
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  Tensor forward(const Tensor& x, Context& ctx) {
    if (ctx.hooks && !own_.empty()) ctx.hooks->before_forward(own_);
    Tensor y = do_forward(x, ctx);
    if (ctx.half) round_to_half(y);
    return y;
  }
  virtual Tensor backward(const Tensor& dy, Context& ctx) = 0;

  /// Parameters in forward order (containers recurse into their children).
  virtual void collect_params(std::vector<Param*>& out) { out.insert(out.end(), own_.begin(), own_.end()); }
  /// Non-trained state saved in checkpoints (batch-norm running statistics).
  virtual void collect_buffers(std::vector<Tensor*>&) {}

  const std::string& name() const { return name_; }

 protected:
  virtual Tensor do_forward(const Tensor& x, Context& ctx) = 0;
  /// Declares this layer's parameters (in forward order); call once from the constructor.
  void own(std::vector<Param*> params) { own_ = std::move(params); }
  static void make_param(Param& p, const std::string& name, Shape shape, bool decay, Param::Init init,
                         float scale = 0.0f);
  void grads_ready(Context& ctx) {
    if (ctx.hooks && !own_.empty()) ctx.hooks->after_backward(own_);
  }

 private:
  std::string name_;
  std::vector<Param*> own_;
};

using ModulePtr = std::unique_ptr<Module>;

/// Children run one after another; backward in reverse.
class Sequential final : public Module {
 public:
  explicit Sequential(std::string name = "") : Module(std::move(name)) {}
  Sequential& add(ModulePtr m) { children_.push_back(std::move(m)); return *this; }
  template <class M, class... A>
  M& emplace(A&&... args) {
    auto m = std::make_unique<M>(std::forward<A>(args)...);
    M& ref = *m;
    children_.push_back(std::move(m));
    return ref;
  }
  Tensor backward(const Tensor& dy, Context& ctx) override;
  void collect_params(std::vector<Param*>& out) override;
  void collect_buffers(std::vector<Tensor*>& out) override;
  bool empty() const { return children_.empty(); }

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  std::vector<ModulePtr> children_;
};

}  // namespace gradsync::trainer
