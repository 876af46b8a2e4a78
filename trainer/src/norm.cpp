#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"

#include <cmath>

namespace gradsync::trainer {

BatchNorm2d::BatchNorm2d(std::string name, std::size_t channels, float momentum, float eps)
    : Module(name), running_mean({channels}, 0.0f), running_var({channels}, 1.0f), c_(channels),
      momentum_(momentum), eps_(eps) {
  make_param(weight, name + ".weight", {channels}, false, Param::Init::ones);
  make_param(bias, name + ".bias", {channels}, false, Param::Init::zeros);
  own({&weight, &bias});
}

void BatchNorm2d::collect_buffers(std::vector<Tensor*>& out) {
  out.push_back(&running_mean);
  out.push_back(&running_var);
}

Tensor BatchNorm2d::do_forward(const Tensor& x, Context& ctx) {
  expect_shape((x.rank() == 2 || x.rank() == 4) && x.dim(1) == c_, name().c_str(), "[N, C] or [N, C, H, W]",
               x.shape());
  const std::size_t n = x.dim(0), s = x.size() / (n * c_);
  Tensor y(x.shape());
  Tensor mean({c_});
  inv_std_.resize({c_});
  if (ctx.training) {
    if (n * s < 2) throw std::invalid_argument(name() + ": batch statistics need more than one value per channel");
    backend::for_each(c_, kernels::BnStats{x.data(), mean.data(), inv_std_.data(), n, c_, s, eps_}, n * s);
    xhat_.resize(x.shape());
    backend::for_each(n * c_, kernels::BnNormalize{x.data(), mean.data(), inv_std_.data(), weight.value.data(),
                                                   bias.value.data(), xhat_.data(), y.data(), c_, s}, s);
    // Running statistics use the unbiased variance, as PyTorch does.
    const float m = float(n * s);
    backend::for_each(c_, kernels::BnRunningUpdate{mean.data(), inv_std_.data(), running_mean.data(),
                                                   running_var.data(), momentum_, eps_, m / (m - 1.0f)});
  } else {
    backend::for_each(c_, kernels::BnEvalInvStd{running_var.data(), inv_std_.data(), eps_});
    backend::for_each(n * c_, kernels::BnNormalize{x.data(), running_mean.data(), inv_std_.data(), weight.value.data(),
                                                   bias.value.data(), nullptr, y.data(), c_, s}, s);
  }
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy, Context& ctx) {
  const std::size_t n = dy.dim(0), s = dy.size() / (n * c_);
  // Local copies: once handed over, the gradients belong to the synchronizer (aggregated in place).
  Tensor dgamma({c_}), dbeta({c_});
  backend::for_each(c_, kernels::BnParamGrads{dy.data(), xhat_.data(), dgamma.data(), dbeta.data(), n, c_, s}, n * s);
  weight.grad = dgamma;
  bias.grad = dbeta;
  grads_ready(ctx);
  Tensor dx(dy.shape());
  backend::for_each(n * c_, kernels::BnInputGrad{dy.data(), xhat_.data(), weight.value.data(), inv_std_.data(),
                                                 dgamma.data(), dbeta.data(), dx.data(), c_, s,
                                                 1.0f / float(n * s)}, s);
  return dx;
}

}  // namespace gradsync::trainer
