// The small layers: activation, pooling, reshaping, linear, dropout, residual, embedding, loss.
#include <cmath>
#include <cstring>
#include <gradsync/core/error.hpp>

#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"

namespace gradsync::trainer {

// ---- ReLU ----
Tensor ReLU::do_forward(const Tensor& x, Context& ctx) {
  Tensor y(x.shape());
  backend::for_each(x.size(), kernels::ReluForward{x.data(), y.data()});
  if (ctx.training) output_ = y;
  return y;
}
Tensor ReLU::backward(const Tensor& dy, Context&) {
  Tensor dx(dy.shape());
  backend::for_each(dy.size(), kernels::ReluBackward{output_.data(), dy.data(), dx.data()});
  return dx;
}

// ---- MaxPool2d ----
MaxPool2d::MaxPool2d(std::string name, std::size_t kernel, std::size_t stride, std::size_t pad)
    : Module(std::move(name)), k_(kernel), stride_(stride), pad_(pad) {
  if (kernel == 0 || stride == 0 || 2 * pad > kernel)
    throw UsageError(this->name() + ": need kernel, stride > 0 and pad <= kernel / 2");
}
Tensor MaxPool2d::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 4 && x.dim(2) + 2 * pad_ >= k_ && x.dim(3) + 2 * pad_ >= k_, name().c_str(),
               "[N, C, H, W] at least as large as the window", x.shape());
  const std::size_t h = x.dim(2), w = x.dim(3);
  const std::size_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  const std::size_t planes = x.dim(0) * x.dim(1);
  Tensor y({x.dim(0), x.dim(1), oh, ow});
  argmax_.resize(y.size());
  backend::for_each_2d(planes, oh * ow, kernels::MaxPoolForward{x.data(), y.data(), argmax_.data(), h, w, k_, stride_,
                                                                 pad_, oh, ow});
  if (ctx.training) in_shape_ = x.shape();
  return y;
}
Tensor MaxPool2d::backward(const Tensor& dy, Context&) {
  Tensor dx(in_shape_);
  const std::size_t planes = in_shape_[0] * in_shape_[1], in_plane = in_shape_[2] * in_shape_[3];
  backend::for_each_2d(planes, in_plane, kernels::MaxPoolBackward{dy.data(), argmax_.data(), dx.data(), in_shape_[3], k_,
                                                                  stride_, pad_, dy.dim(2), dy.dim(3), in_plane});
  return dx;
}

// ---- GlobalAvgPool ----
Tensor GlobalAvgPool::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 4, name().c_str(), "[N, C, H, W]", x.shape());
  if (ctx.training) in_shape_ = x.shape();  // backward's state: not in eval mode
  Tensor y({x.dim(0), x.dim(1)});
  const std::size_t s = x.dim(2) * x.dim(3);
  backend::reduce_rows(y.size(), s, kernels::PlaneSum{x.data(), s}, y.data(), 1.0 / double(s));
  return y;
}
Tensor GlobalAvgPool::backward(const Tensor& dy, Context&) {
  Tensor dx(in_shape_);
  const std::size_t s = in_shape_[2] * in_shape_[3];
  backend::for_each_2d(dy.size(), s, kernels::PlaneBroadcast{dy.data(), dx.data(), s});
  return dx;
}

// ---- Flatten, LastStep, RowsAsSequence ----
Tensor Flatten::do_forward(const Tensor& x, Context& ctx) {
  if (ctx.training) in_shape_ = x.shape();  // backward's state: not in eval mode
  return x.reshaped({x.dim(0), x.size() / x.dim(0)});
}

Tensor LastStep::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 3, name().c_str(), "[N, T, F]", x.shape());
  if (ctx.training) in_shape_ = x.shape();  // backward's state: not in eval mode
  const std::size_t n = x.dim(0), t = x.dim(1), f = x.dim(2);
  Tensor y({n, f});
  backend::for_each(n, kernels::StridedRows{x.data(), y.data(), f, t * f, (t - 1) * f, f, 0}, f);
  return y;
}
Tensor LastStep::backward(const Tensor& dy, Context&) {
  Tensor dx(in_shape_, 0.0f);
  const std::size_t n = in_shape_[0], t = in_shape_[1], f = in_shape_[2];
  backend::for_each(n, kernels::StridedRows{dy.data(), dx.data(), f, f, 0, t * f, (t - 1) * f}, f);
  return dx;
}

Tensor RowsAsSequence::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 4, name().c_str(), "[N, C, H, W]", x.shape());
  if (ctx.training) in_shape_ = x.shape();  // backward's state: not in eval mode
  const std::size_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor y({n, h, c * w});
  backend::for_each(n * h * c, kernels::SwapAxes{x.data(), y.data(), c, h, w}, w);  // [n, c, h, w] -> [n, h, c, w]
  return y;
}
Tensor RowsAsSequence::backward(const Tensor& dy, Context&) {
  Tensor dx(in_shape_);
  const std::size_t n = in_shape_[0], c = in_shape_[1], h = in_shape_[2], w = in_shape_[3];
  backend::for_each(n * c * h, kernels::SwapAxes{dy.data(), dx.data(), h, c, w}, w);
  return dx;
}

// ---- Linear ----
Linear::Linear(std::string name, std::size_t in, std::size_t out, bool bias)
    : Module(name), in_(in), out_(out), has_bias_(bias) {
  if (in == 0 || out == 0) throw UsageError(name + ": sizes must be positive");
  // Normal(0, 1/sqrt(in)): unit-variance outputs for unit-variance inputs.
  make_param(weight, name + ".weight", {out, in}, true, Param::Init::normal, 1.0f / std::sqrt(float(in)));
  if (bias) {
    make_param(this->bias, name + ".bias", {out}, false, Param::Init::zeros);
    own({&weight, &this->bias});
  } else {
    own({&weight});
  }
}
Tensor Linear::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() >= 2 && x.shape().back() == in_, name().c_str(), "[..., in]", x.shape());
  const std::size_t m = x.size() / in_;
  Shape ys = x.shape();
  ys.back() = out_;
  Tensor y(ys);
  backend::gemm(false, true, m, out_, in_, 1.0f, x.data(), in_, weight.value.data(), in_, 0.0f, y.data(), out_);
  if (has_bias_) backend::for_each_2d(m, out_, kernels::AddRowBias{y.data(), bias.value.data(), out_});
  if (ctx.training) input_ = x;
  return y;
}
Tensor Linear::backward(const Tensor& dy, Context& ctx) {
  const std::size_t m = dy.size() / out_;
  backend::gemm(true, false, out_, in_, m, 1.0f, dy.data(), out_, input_.data(), in_, 0.0f, weight.grad.data(), in_);
  if (has_bias_) backend::for_each(out_, kernels::ColumnSum{dy.data(), bias.grad.data(), m, out_}, m);
  grads_ready(ctx);
  Tensor dx(input_.shape());
  backend::gemm(false, false, m, in_, out_, 1.0f, dy.data(), out_, weight.value.data(), in_, 0.0f, dx.data(), in_);
  return dx;
}

// ---- Dropout ----
Dropout::Dropout(std::string name, float p, std::uint64_t layer_id) : Module(std::move(name)), p_(p), id_(layer_id) {
  if (!(p >= 0.0f && p < 1.0f)) throw UsageError(this->name() + ": p must be in [0, 1)");
}
namespace {
std::uint64_t dropout_key(std::uint64_t seed, std::uint64_t step, std::uint64_t id) {
  return seed * 0x100000001B3ull ^ (step << 20) ^ (id * 0x9E3779B97F4A7C15ull);
}
}  // namespace
Tensor Dropout::do_forward(const Tensor& x, Context& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  if (!active_) return x;
  seed_ = ctx.seed;
  step_ = ctx.step;
  Tensor y(x.shape());
  backend::for_each(x.size(), kernels::DropoutApply{x.data(), y.data(), dropout_key(seed_, step_, id_), p_,
                                                    1.0f / (1.0f - p_)});
  return y;
}
Tensor Dropout::backward(const Tensor& dy, Context&) {
  if (!active_) return dy;
  Tensor dx(dy.shape());
  backend::for_each(dy.size(), kernels::DropoutApply{dy.data(), dx.data(), dropout_key(seed_, step_, id_), p_,
                                                     1.0f / (1.0f - p_)});
  return dx;
}

// ---- Residual ----
Residual::Residual(std::string name, ModulePtr main, ModulePtr shortcut, bool relu_after)
    : Module(std::move(name)), main_(std::move(main)), shortcut_(std::move(shortcut)), relu_(relu_after) {}
void Residual::collect_params(std::vector<Param*>& out) {
  main_->collect_params(out);
  if (shortcut_) shortcut_->collect_params(out);
}
void Residual::collect_buffers(std::vector<Tensor*>& out) {
  main_->collect_buffers(out);
  if (shortcut_) shortcut_->collect_buffers(out);
}
Tensor Residual::do_forward(const Tensor& x, Context& ctx) {
  Tensor a = main_->forward(x, ctx);
  Tensor b = shortcut_ ? shortcut_->forward(x, ctx) : x;
  if (a.shape() != b.shape())
    throw UsageError(name() + ": main path " + to_string(a.shape()) + " and shortcut " + to_string(b.shape()) +
                                " differ");
  if (relu_) backend::for_each(a.size(), kernels::AddRelu{a.data(), b.data(), a.data()});
  else backend::for_each(a.size(), kernels::Add{a.data(), b.data(), a.data()});
  if (ctx.training && relu_) output_ = a;
  return a;
}
Tensor Residual::backward(const Tensor& dy, Context& ctx) {
  Tensor masked;  // dy through the ReLU
  if (relu_) {
    masked = Tensor(dy.shape());
    backend::for_each(dy.size(), kernels::ReluBackward{output_.data(), dy.data(), masked.data()});
  }
  const Tensor& d = relu_ ? masked : dy;
  // Reverse of forward: the shortcut's gradients first, then the main path's.
  Tensor dx = shortcut_ ? shortcut_->backward(d, ctx) : d;
  Tensor dmain = main_->backward(d, ctx);
  backend::for_each(dx.size(), kernels::Accumulate{dmain.data(), dx.data()});
  return dx;
}

// ---- Embedding ----
Embedding::Embedding(std::string name, std::size_t vocab, std::size_t dim) : Module(name), vocab_(vocab), dim_(dim) {
  make_param(weight, name + ".weight", {vocab, dim}, true, Param::Init::normal, 1.0f);
  own({&weight});
}
Tensor Embedding::do_forward(const Tensor& x, Context&) {
  expect_shape(x.rank() == 2, name().c_str(), "token ids [N, T]", x.shape());
  const std::vector<float> tokens = x.to_host();  // validated on the host
  std::vector<std::uint32_t> ids(tokens.size());
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const float v = tokens[r];
    if (!(v >= 0.0f && v < float(vocab_)) || v != std::floor(v))
      throw UsageError(name() + ": token id " + std::to_string(v) + " outside [0, " + std::to_string(vocab_) + ")");
    ids[r] = std::uint32_t(v);
  }
  from_host<std::uint32_t>(ids_, ids);
  Tensor y({x.dim(0), x.dim(1), dim_});
  backend::for_each(ids.size(), kernels::EmbeddingGather{weight.value.data(), ids_.data(), y.data(), dim_}, dim_);
  return y;
}
Tensor Embedding::backward(const Tensor& dy, Context& ctx) {
  weight.grad.fill(0.0f);
  backend::for_each(dim_, kernels::EmbeddingScatter{dy.data(), ids_.data(), weight.grad.data(), ids_.size(), dim_},
                    ids_.size());
  grads_ready(ctx);
  return Tensor(Shape{dy.dim(0), dy.dim(1)}, 0.0f);  // ids have no gradient
}

// ---- SoftmaxCrossEntropy ----
float SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const std::int32_t> labels) {
  const std::size_t c = logits.shape().back(), m = logits.size() / c;
  if (labels.size() != m)
    throw UsageError("cross-entropy: " + std::to_string(labels.size()) + " labels for " + std::to_string(m) +
                                " rows of logits " + to_string(logits.shape()));
  for (auto y : labels)
    if (y < 0 || std::size_t(y) >= c)
      throw UsageError("cross-entropy: label " + std::to_string(y) + " outside [0, " + std::to_string(c) + ")");
  probs_.resize({m, c});
  from_host(labels_, labels);
  Buffer<float> loss(m);
  Buffer<std::uint8_t> ok(m);
  backend::for_each(m, kernels::SoftmaxXent{logits.data(), labels_.data(), probs_.data(), loss.data(), ok.data(), c}, c);
  const std::vector<float> row_loss = to_host(loss);  // summed on the host in a fixed order
  const std::vector<std::uint8_t> row_ok = to_host(ok);
  double total = 0.0;
  correct_ = 0;
  for (std::size_t r = 0; r < m; ++r) { total += row_loss[r]; correct_ += row_ok[r]; }
  return float(total / double(m));
}
Tensor SoftmaxCrossEntropy::backward() const {
  Tensor d = probs_;
  const std::size_t c = probs_.dim(1), m = probs_.dim(0);
  backend::for_each(m, kernels::XentGrad{d.data(), labels_.data(), c, 1.0f / float(m)}, c);
  return d;
}

}  // namespace gradsync::trainer
