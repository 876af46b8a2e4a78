#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"
#include <gradsync/core/error.hpp>

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
  if (ctx.training && n * s < 2) throw UsageError(name() + ": batch statistics need more than one value per channel");
  Tensor y(x.shape());
#if defined(GRADSYNC_TRAINER_CUDNN)
  if (ctx.training) cudnn_.forward_training(x, weight.value, bias.value, y, running_mean, running_var, momentum_, eps_);
  else cudnn_.forward_inference(x, weight.value, bias.value, y, running_mean, running_var, eps_);
#else
  Tensor mean({c_});
  inv_std_.resize({c_});
  if (ctx.training) {
    // Per plane a sum and squared deviations from the plane's mean (accurate as a two-pass
    // variance), combined per channel.
    partial_.resize({2, n * c_});
    float* sum = partial_.data();
    float* m2 = sum + n * c_;
    Tensor var({c_});
    backend::for_each(n * c_, kernels::PlaneMoments{x.data(), sum, m2, s}, 3 * s);
    backend::for_each(c_, kernels::ChannelMoments{sum, m2, mean.data(), var.data(), n, c_, s}, 4 * n);
    backend::for_each(c_, kernels::BnEvalInvStd{var.data(), inv_std_.data(), eps_});
    xhat_.resize(x.shape());
    backend::for_each_2d(n * c_, s, kernels::BnNormalize{x.data(), mean.data(), inv_std_.data(), weight.value.data(),
                                                         bias.value.data(), xhat_.data(), y.data(), c_, s});
    // Running statistics use the unbiased variance, as PyTorch does.
    const float m = float(n * s);
    backend::for_each(c_, kernels::BnRunningUpdate{mean.data(), inv_std_.data(), running_mean.data(),
                                                   running_var.data(), momentum_, eps_, m / (m - 1.0f)});
  } else {
    backend::for_each(c_, kernels::BnEvalInvStd{running_var.data(), inv_std_.data(), eps_});
    backend::for_each_2d(n * c_, s, kernels::BnNormalize{x.data(), running_mean.data(), inv_std_.data(),
                                                         weight.value.data(), bias.value.data(), nullptr, y.data(), c_, s});
  }
#endif
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy, Context& ctx) {
#if defined(GRADSYNC_TRAINER_CUDNN)
  // One call gives dx with the parameter gradients, so none is handed over before dx is computed.
  Tensor dx(dy.shape());
  cudnn_.backward(dy, weight.value, dx, weight.grad.data(), bias.grad.data());
  grads_ready(ctx);
#else
  const std::size_t n = dy.dim(0), s = dy.size() / (n * c_);
  // Local copies: once handed over, the gradients belong to the synchronizer (aggregated in place).
  Tensor dgamma({c_}), dbeta({c_});
  partial_.resize({2, n * c_});  // per plane: sum(dy * xhat), sum(dy)
  float* dot = partial_.data();
  float* sum = dot + n * c_;
  backend::for_each(n * c_, kernels::PlaneDotAndSum{dy.data(), xhat_.data(), dot, sum, s}, 3 * s);
  backend::reduce_rows(c_, n, kernels::ChannelPartial{dot, c_}, dgamma.data());
  backend::reduce_rows(c_, n, kernels::ChannelPartial{sum, c_}, dbeta.data());
  weight.grad = dgamma;
  bias.grad = dbeta;
  grads_ready(ctx);
  Tensor dx(dy.shape());
  backend::for_each_2d(n * c_, s, kernels::BnInputGrad{dy.data(), xhat_.data(), weight.value.data(), inv_std_.data(),
                                                       dgamma.data(), dbeta.data(), dx.data(), c_, s, 1.0f / float(n * s)});
#endif
  return dx;
}

}  // namespace gradsync::trainer
