#include <algorithm>
#include <cmath>
#include <gradsync/core/error.hpp>

#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"
#if !defined(GRADSYNC_TRAINER_CUDA)
#include "gradsync/trainer/onednn.hpp"
#endif

namespace gradsync::trainer {

namespace {
// Images per im2col chunk: as many as fit in ~16M floats of column matrix (64 MiB), at least one.
std::size_t chunk_images(std::size_t n, std::size_t rows, std::size_t cols_per_image) {
  constexpr std::size_t budget = std::size_t(1) << 24;
  return std::clamp<std::size_t>(budget / std::max<std::size_t>(1, rows * cols_per_image), 1, n);
}
}  // namespace

Conv2d::Conv2d(std::string name, std::size_t in, std::size_t out, std::size_t kernel, std::size_t stride,
               std::size_t pad, bool bias)
    : Module(name), in_(in), out_(out), k_(kernel), stride_(stride), pad_(pad), has_bias_(bias) {
  if (in == 0 || out == 0 || kernel == 0 || stride == 0)
    throw UsageError(name + ": channels, kernel and stride must be positive");
  // Kaiming-normal (fan_out, as torchvision's ResNet/VGG): keeps activations' scale through ReLUs.
  make_param(weight, name + ".weight", {out, in, kernel, kernel}, true, Param::Init::normal,
             std::sqrt(2.0f / float(out * kernel * kernel)));
  if (bias) {
    make_param(this->bias, name + ".bias", {out}, false, Param::Init::zeros);
    own({&weight, &this->bias});
  } else {
    own({&weight});
  }
}

Conv2d::Shifted Conv2d::shifted(std::size_t h, std::size_t w, std::size_t oh) {
  Shifted g;
  g.wp = w + 2 * pad_;
  g.plane = (h + 2 * pad_) * g.wp + k_ - 1;
  g.positions = oh * g.wp;
  padded_.resize({in_, g.plane});
  col_.resize({in_ * k_ * k_, g.positions});
  chunk_.resize({out_, g.positions});
  return g;
}

void Conv2d::pad_image(const float* x, std::size_t h, std::size_t w, const Shifted& g) {
  backend::for_each(in_, kernels::PadImage{x, padded_.data(), h, w, pad_, g.plane}, g.plane);
  backend::for_each(in_ * k_ * k_, kernels::ShiftedIm2col{padded_.data(), col_.data(), k_, g.wp, g.plane, g.positions},
                    g.positions);
}

Tensor Conv2d::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 4 && x.dim(1) == in_, name().c_str(), "[N, in, H, W]", x.shape());
  const std::size_t n = x.dim(0), h = x.dim(2), w = x.dim(3);
  if (h + 2 * pad_ < k_ || w + 2 * pad_ < k_)
    throw UsageError(name() + ": input " + to_string(x.shape()) + " is smaller than the kernel");
  const std::size_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
#if defined(GRADSYNC_TRAINER_CUDNN)
  if (lowering_ == Lowering::automatic) {
    Tensor y({n, out_, oh, ow});
    cudnn_.forward(x, weight.value, has_bias_ ? bias.value.data() : nullptr, y);
    if (ctx.training) input_ = x;
    return y;
  }
#elif !defined(GRADSYNC_TRAINER_CUDA)
  if (lowering_ == Lowering::automatic) return onednn_forward(x, oh, ow, ctx);
#endif
  const std::size_t rows = in_ * k_ * k_, s = oh * ow;
  const std::size_t nb_max = per_image() ? 1 : chunk_images(n, rows, s);
  Tensor y({n, out_, oh, ow});
  if (nb_max == 1 && stride_ == 1) {  // padded-width form (kernels.hpp): contiguous im2col rows
    const Shifted g = shifted(h, w, oh);
    for (std::size_t i = 0; i < n; ++i) {
      pad_image(x.data() + i * in_ * h * w, h, w, g);
      backend::gemm(false, false, out_, g.positions, rows, 1.0f, weight.value.data(), rows, col_.data(), g.positions,
                    0.0f, chunk_.data(), g.positions);
      backend::for_each(out_, kernels::CropColumns{chunk_.data(), has_bias_ ? bias.value.data() : nullptr,
                                                   y.data() + i * out_ * s, oh, ow, g.wp}, g.positions);
    }
    if (ctx.training) input_ = x;
    col_valid_ = false;
    return y;
  }
  col_.resize({rows, nb_max * s});
  if (nb_max > 1) chunk_.resize({out_, nb_max * s});
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    backend::for_each_2d(nb * rows, s, kernels::Im2col{x.data() + b0 * in_ * h * w, col_.data(), in_, h, w, k_, stride_,
                                                       pad_, oh, ow, ld});
    float* yb = y.data() + b0 * out_ * s;
    if (nb == 1) {  // the GEMM output is already NCHW for a single image
      backend::gemm(false, false, out_, s, rows, 1.0f, weight.value.data(), rows, col_.data(), ld, 0.0f, yb, s);
      if (has_bias_)  // in place: chunk and NCHW coincide for one image
        backend::for_each_2d(out_, s, kernels::ChunkToNchw{yb, bias.value.data(), yb, out_, s, 1});
    } else {
      backend::gemm(false, false, out_, ld, rows, 1.0f, weight.value.data(), rows, col_.data(), ld, 0.0f,
                    chunk_.data(), ld);
      backend::for_each_2d(nb * out_, s, kernels::ChunkToNchw{chunk_.data(), has_bias_ ? bias.value.data() : nullptr, yb,
                                                               out_, s, nb});
    }
  }
  if (ctx.training) input_ = x;
  // With the batch in one chunk, col_ still holds the whole column matrix: backward reuses it.
  col_valid_ = ctx.training && nb_max >= n;
  return y;
}

Tensor Conv2d::backward(const Tensor& dy, Context& ctx) {
#if defined(GRADSYNC_TRAINER_CUDNN)
  if (lowering_ == Lowering::automatic) {  // parameter gradients first, as below
    cudnn_.backward_filter(input_, dy, weight.grad.data(), has_bias_ ? bias.grad.data() : nullptr);
    grads_ready(ctx);
    Tensor dx(input_.shape());
    cudnn_.backward_data(weight.value, dy, dx);
    return dx;
  }
#elif !defined(GRADSYNC_TRAINER_CUDA)
  if (lowering_ == Lowering::automatic) return onednn_backward(dy, ctx);
#endif
  const std::size_t n = input_.dim(0), s = dy.dim(2) * dy.dim(3), rows = in_ * k_ * k_;
  const std::size_t nb_max = per_image() ? 1 : chunk_images(n, rows, s);
  if (has_bias_) {  // per-plane partial sums, then per channel (kernels.hpp PlaneSum)
    Tensor partial({n * out_});
    backend::reduce_rows(n * out_, s, kernels::PlaneSum{dy.data(), s}, partial.data());
    backend::reduce_rows(out_, n, kernels::ChannelPartial{partial.data(), out_}, bias.grad.data());
  }
  Tensor dx(input_.shape());
  if (nb_max == 1 && stride_ == 1) backward_shifted(dy, dx, ctx);  // padded-width form, as in forward
  else if (nb_max == 1) backward_per_image(dy, dx, ctx);
  else backward_batched(dy, dx, nb_max, ctx);
  return dx;
}

void Conv2d::im2col(std::size_t b0, std::size_t nb, std::size_t oh, std::size_t ow) {
  const std::size_t h = input_.dim(2), w = input_.dim(3);
  backend::for_each_2d(nb * in_ * k_ * k_, oh * ow, kernels::Im2col{input_.data() + b0 * in_ * h * w, col_.data(), in_, h,
                                                                    w, k_, stride_, pad_, oh, ow, nb * oh * ow});
}

void Conv2d::col2im(std::size_t b0, std::size_t nb, std::size_t oh, std::size_t ow, Tensor& dx) {
  const std::size_t h = input_.dim(2), w = input_.dim(3);
  backend::for_each_2d(nb * in_, h * w, kernels::Col2im{col_.data(), dx.data() + b0 * in_ * h * w, in_, h, w, k_,
                                                        stride_, pad_, oh, ow, nb * oh * ow});
}

void Conv2d::backward_shifted(const Tensor& dy, Tensor& dx, Context& ctx) {
  const std::size_t n = input_.dim(0), h = input_.dim(2), w = input_.dim(3);
  const std::size_t oh = dy.dim(2), ow = dy.dim(3), s = oh * ow, rows = in_ * k_ * k_;
  const Shifted g = shifted(h, w, oh);
  auto widen = [&](std::size_t i) {
    backend::for_each(out_, kernels::WidenColumns{dy.data() + i * out_ * s, chunk_.data(), oh, ow, g.wp}, g.positions);
  };
  for (std::size_t i = 0; i < n; ++i) {
    pad_image(input_.data() + i * in_ * h * w, h, w, g);
    widen(i);
    backend::gemm(false, true, out_, rows, g.positions, 1.0f, chunk_.data(), g.positions, col_.data(), g.positions,
                  i == 0 ? 0.0f : 1.0f, weight.grad.data(), rows);
  }
  grads_ready(ctx);
  for (std::size_t i = 0; i < n; ++i) {
    widen(i);
    backend::gemm(true, false, rows, g.positions, out_, 1.0f, weight.value.data(), rows, chunk_.data(), g.positions,
                  0.0f, col_.data(), g.positions);
    backend::for_each(in_, kernels::ShiftedCol2im{col_.data(), padded_.data(), dx.data() + i * in_ * h * w, h, w, k_,
                                                  pad_, g.plane, g.positions}, k_ * k_ * g.positions);
  }
}

void Conv2d::backward_per_image(const Tensor& dy, Tensor& dx, Context& ctx) {  // dy_i is already [out, S], no gather
  const std::size_t n = input_.dim(0), oh = dy.dim(2), ow = dy.dim(3), s = oh * ow, rows = in_ * k_ * k_;
  col_.resize({rows, s});
  for (std::size_t i = 0; i < n; ++i) {
    im2col(i, 1, oh, ow);
    backend::gemm(false, true, out_, rows, s, 1.0f, dy.data() + i * out_ * s, s, col_.data(), s, i == 0 ? 0.0f : 1.0f,
                  weight.grad.data(), rows);
  }
  grads_ready(ctx);  // parameter gradients first: the synchronizer starts on them during pass 2
  for (std::size_t i = 0; i < n; ++i) {
    backend::gemm(true, false, rows, s, out_, 1.0f, weight.value.data(), rows, dy.data() + i * out_ * s, s, 0.0f,
                  col_.data(), s);
    col2im(i, 1, oh, ow, dx);
  }
  col_valid_ = false;
}

void Conv2d::backward_batched(const Tensor& dy, Tensor& dx, std::size_t nb_max, Context& ctx) {
  const std::size_t n = input_.dim(0), oh = dy.dim(2), ow = dy.dim(3), s = oh * ow, rows = in_ * k_ * k_;
  col_.resize({rows, nb_max * s});
  chunk_.resize({out_, nb_max * s});  // dy of a chunk as [out, nb * S]
  auto gather = [&](std::size_t b0, std::size_t nb) {
    backend::for_each_2d(nb * out_, s, kernels::NchwToChunk{dy.data() + b0 * out_ * s, chunk_.data(), out_, s, nb});
  };
  // Pass 1: parameter gradients, so they can be handed to the synchronizer before the input gradient.
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    if (!col_valid_) im2col(b0, nb, oh, ow);
    gather(b0, nb);
    backend::gemm(false, true, out_, rows, ld, 1.0f, chunk_.data(), ld, col_.data(), ld, b0 == 0 ? 0.0f : 1.0f,
                  weight.grad.data(), rows);
  }
  grads_ready(ctx);
  col_valid_ = false;  // pass 2 overwrites col_ with the column gradient
  // Pass 2: input gradient, dcol = W^T dY, then col2im.
  const bool single_chunk = nb_max >= n;
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    if (!single_chunk) gather(b0, nb);
    backend::gemm(true, false, rows, ld, out_, 1.0f, weight.value.data(), rows, chunk_.data(), ld, 0.0f, col_.data(),
                  ld);
    col2im(b0, nb, oh, ow, dx);
  }
}

#if !defined(GRADSYNC_TRAINER_CUDA)
Tensor Conv2d::onednn_forward(const Tensor& x, std::size_t oh, std::size_t ow, Context& ctx) {
  if (!onednn_)
    onednn_ = std::make_shared<onednn::Convolution>(onednn::ConvGeometry{in_, out_, k_, stride_, pad_, has_bias_});
  Tensor y({x.dim(0), out_, oh, ow});
  onednn_->forward(x.data(), x.dim(0), x.dim(2), x.dim(3), weight.value.data(), has_bias_ ? bias.value.data() : nullptr,
                   y.data(), ctx.training);
  return y;
}

Tensor Conv2d::onednn_backward(const Tensor& dy, Context& ctx) {
  if (!onednn_) throw UsageError(name() + ": backward before any forward; run a training forward first");
  onednn_->backward_weights(dy.data(), weight.grad.data(), has_bias_ ? bias.grad.data() : nullptr);
  grads_ready(ctx);  // parameter gradients first: the synchronizer starts on them meanwhile
  const auto in = onednn_->input();
  Tensor dx({in.n, in_, in.h, in.w});
  onednn_->backward_data(dy.data(), weight.value.data(), dx.data());
  return dx;
}
#endif

}  // namespace gradsync::trainer
