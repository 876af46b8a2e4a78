#include <algorithm>
#include <cmath>

#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"

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
    throw std::invalid_argument(name + ": channels, kernel and stride must be positive");
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

Tensor Conv2d::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 4 && x.dim(1) == in_, name().c_str(), "[N, in, H, W]", x.shape());
  const std::size_t n = x.dim(0), h = x.dim(2), w = x.dim(3);
  if (h + 2 * pad_ < k_ || w + 2 * pad_ < k_)
    throw std::invalid_argument(name() + ": input " + to_string(x.shape()) + " is smaller than the kernel");
  const std::size_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  const std::size_t rows = in_ * k_ * k_, s = oh * ow, nb_max = chunk_images(n, rows, s);
  Tensor y({n, out_, oh, ow});
  Buffer<float> chunk_out(nb_max > 1 ? out_ * nb_max * s : 0);
  col_.resize(rows * nb_max * s);
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    for (std::size_t i = 0; i < nb; ++i)
      backend::for_each(rows, kernels::Im2col{x.data() + (b0 + i) * in_ * h * w, col_.data(), h, w, k_, stride_,
                                              pad_, oh, ow, ld, i * s}, s);
    float* yb = y.data() + b0 * out_ * s;
    if (nb == 1) {  // the GEMM output is already NCHW for a single image
      backend::gemm(false, false, out_, s, rows, 1.0f, weight.value.data(), rows, col_.data(), ld, 0.0f, yb, s);
      if (has_bias_)  // in place: chunk and NCHW coincide for one image
        backend::for_each(out_, kernels::ChunkToNchw{yb, bias.value.data(), yb, out_, s, 1}, s);
    } else {
      backend::gemm(false, false, out_, ld, rows, 1.0f, weight.value.data(), rows, col_.data(), ld, 0.0f,
                    chunk_out.data(), ld);
      backend::for_each(nb * out_, kernels::ChunkToNchw{chunk_out.data(), has_bias_ ? bias.value.data() : nullptr,
                                                         yb, out_, s, nb}, s);
    }
  }
  if (ctx.training) input_ = x;
  // With the batch in one chunk, col_ still holds the whole column matrix: backward reuses it.
  col_valid_ = ctx.training && nb_max >= n;
  return y;
}

Tensor Conv2d::backward(const Tensor& dy, Context& ctx) {
  const std::size_t n = input_.dim(0), h = input_.dim(2), w = input_.dim(3);
  const std::size_t oh = dy.dim(2), ow = dy.dim(3), s = oh * ow, rows = in_ * k_ * k_;
  const std::size_t nb_max = chunk_images(n, rows, s);
  Buffer<float> dchunk(out_ * nb_max * s);  // dy of a chunk as [out, nb * S]
  col_.resize(rows * nb_max * s);
  auto gather = [&](std::size_t b0, std::size_t nb) {
    backend::for_each(nb * out_, kernels::NchwToChunk{dy.data() + b0 * out_ * s, dchunk.data(), out_, s, nb}, s);
  };
  // Pass 1: parameter gradients, so they can be handed to the synchronizer before the input gradient.
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    if (!col_valid_)
      for (std::size_t i = 0; i < nb; ++i)
        backend::for_each(rows, kernels::Im2col{input_.data() + (b0 + i) * in_ * h * w, col_.data(), h, w, k_,
                                                stride_, pad_, oh, ow, ld, i * s}, s);
    gather(b0, nb);
    backend::gemm(false, true, out_, rows, ld, 1.0f, dchunk.data(), ld, col_.data(), ld, b0 == 0 ? 0.0f : 1.0f,
                  weight.grad.data(), rows);
  }
  if (has_bias_) backend::for_each(out_, kernels::ChannelSum{dy.data(), bias.grad.data(), n, out_, s}, n * s);
  grads_ready(ctx);
  col_valid_ = false;  // pass 2 overwrites col_ with the column gradient
  // Pass 2: input gradient, dcol = W^T dY, then col2im. Large maps go one image at a time (dy_i is
  // already [out, S] in NCHW), so dcol is still in cache for col2im instead of making a round trip
  // to memory; small maps keep whole chunks, where per-image products would be too thin.
  Tensor dx(input_.shape());
  if (s >= 64) {
    for (std::size_t i = 0; i < n; ++i) {
      backend::gemm(true, false, rows, s, out_, 1.0f, weight.value.data(), rows, dy.data() + i * out_ * s, s, 0.0f,
                    col_.data(), s);
      backend::for_each(in_, kernels::Col2im{col_.data(), dx.data() + i * in_ * h * w, h, w, k_, stride_, pad_, oh,
                                             ow, s, 0}, k_ * k_ * s);
    }
    return dx;
  }
  const bool single_chunk = nb_max >= n;
  for (std::size_t b0 = 0; b0 < n; b0 += nb_max) {
    const std::size_t nb = std::min(nb_max, n - b0), ld = nb * s;
    if (!single_chunk) gather(b0, nb);
    backend::gemm(true, false, rows, ld, out_, 1.0f, weight.value.data(), rows, dchunk.data(), ld, 0.0f, col_.data(),
                  ld);
    for (std::size_t i = 0; i < nb; ++i)
      backend::for_each(in_, kernels::Col2im{col_.data(), dx.data() + (b0 + i) * in_ * h * w, h, w, k_, stride_, pad_,
                                             oh, ow, ld, i * s}, k_ * k_ * s);
  }
  return dx;
}

}  // namespace gradsync::trainer
