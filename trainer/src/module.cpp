#include "gradsync/trainer/module.hpp"

namespace gradsync::trainer {

void Module::make_param(Param& p, const std::string& name, Shape shape, bool decay, Param::Init init, float scale) {
  p.name = name;
  p.value = Tensor(shape, 0.0f);
  p.grad = Tensor(shape, 0.0f);
  p.decay = decay;
  p.init = init;
  p.init_scale = scale;
}

Tensor Sequential::do_forward(const Tensor& x, Context& ctx) {
  if (children_.empty()) return x;
  Tensor y = children_.front()->forward(x, ctx);
  for (std::size_t i = 1; i < children_.size(); ++i) y = children_[i]->forward(y, ctx);
  return y;
}

Tensor Sequential::backward(const Tensor& dy, Context& ctx) {
  if (children_.empty()) return dy;
  // Each child's input gradient is what it hands on: fp16 storage under mixed precision.
  auto step = [&](Module& m, const Tensor& g) {
    Tensor d = m.backward(g, ctx);
    if (ctx.half) round_to_half(d);
    return d;
  };
  Tensor d = step(*children_.back(), dy);
  for (std::size_t i = children_.size() - 1; i-- > 0;) d = step(*children_[i], d);
  return d;
}

void Sequential::collect_params(std::vector<Param*>& out) {
  for (auto& c : children_) c->collect_params(out);
}

void Sequential::collect_buffers(std::vector<Tensor*>& out) {
  for (auto& c : children_) c->collect_buffers(out);
}

}  // namespace gradsync::trainer
