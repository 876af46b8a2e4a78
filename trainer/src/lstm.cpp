#include <algorithm>
#include <cmath>
#include <cstring>
#include <gradsync/core/error.hpp>

#include "gradsync/trainer/half.hpp"
#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"

namespace gradsync::trainer {

namespace {
// rows(lo, hi) over slices of the batch [0, n), one per thread of the team. Samples are independent
// through time, so each thread runs the whole recurrence for its rows and the team meets once per
// pass; a step's own GEMM (32 x 512 x 128 for the lstm model) is too small to split at every step.
// The device runs the batch whole.
template <class Rows>
void over_batch(std::size_t n, const Rows& rows) {
#if defined(GRADSYNC_TRAINER_CUDA)
  rows(std::size_t(0), n);
#else
  const std::size_t parts = std::min(std::size_t(host::threads()), n);
  const std::size_t always_parallel = std::size_t(1) << 16;  // a slice is worth far more than a wake-up
  host::for_each(parts, [&](std::size_t p) { rows(n * p / parts, n * (p + 1) / parts); }, always_parallel);
#endif
}
}  // namespace

LSTM::LSTM(std::string name, std::size_t in, std::size_t hidden) : Module(name), in_(in), h_(hidden) {
  if (in == 0 || hidden == 0) throw UsageError(name + ": sizes must be positive");
  const float bound = 1.0f / std::sqrt(float(hidden));  // PyTorch's LSTM initialisation
  make_param(w_ih, name + ".weight_ih", {4 * hidden, in}, true, Param::Init::uniform, bound);
  make_param(w_hh, name + ".weight_hh", {4 * hidden, hidden}, true, Param::Init::uniform, bound);
  make_param(bias, name + ".bias", {4 * hidden}, false, Param::Init::uniform, bound);
  own({&w_ih, &w_hh, &bias});
}

// Time-major buffers ([T, N, ...]) make each step's rows contiguous and let the weight gradients be
// one GEMM over all steps.
Tensor LSTM::do_forward(const Tensor& x, Context& ctx) {
  expect_shape(x.rank() == 3 && x.dim(2) == in_, name().c_str(), "[N, T, in]", x.shape());
  const std::size_t n = x.dim(0), t = x.dim(1), g4 = 4 * h_;
  input_.resize({t, n, in_});
  backend::for_each(t * n, kernels::SwapAxes{x.data(), input_.data(), n, t, in_}, in_);  // [N, T] -> [T, N]
  gates_.resize(t * n * g4);
  cells_.resize((t + 1) * n * h_);
  hidden_.resize((t + 1) * n * h_);
  backend::for_each(n * h_, kernels::Fill{cells_.data(), 0.0f});  // c_{-1}, h_{-1}; later steps are written
  backend::for_each(n * h_, kernels::Fill{hidden_.data(), 0.0f});
  // Input contributions for all steps at once, then the recurrent part step by step.
  backend::gemm(false, true, t * n, g4, in_, 1.0f, input_.data(), in_, w_ih.value.data(), in_, 0.0f, gates_.data(), g4);
  backend::for_each_2d(t * n, g4, kernels::AddRowBias{gates_.data(), bias.value.data(), g4});
  over_batch(n, [&](std::size_t lo, std::size_t hi) { forward_steps(t, n, lo, hi - lo, ctx.half); });
  Tensor y({n, t, h_});
  backend::for_each(n * t, kernels::SwapAxes{hidden_.data() + n * h_, y.data(), t, n, h_}, h_);
  if (!ctx.training) input_ = Tensor();
  return y;
}

// Steps 0..t-1 for batch rows [lo, lo + rows) of the n.
void LSTM::forward_steps(std::size_t t, std::size_t n, std::size_t lo, std::size_t rows, bool half) {
  const std::size_t g4 = 4 * h_;
  for (std::size_t s = 0; s < t; ++s) {
    float* a = gates_.data() + (s * n + lo) * g4;
    const float* h_prev = hidden_.data() + (s * n + lo) * h_;
    backend::gemm(false, true, rows, g4, h_, 1.0f, h_prev, h_, w_hh.value.data(), h_, 1.0f, a, g4);
    float* h = hidden_.data() + ((s + 1) * n + lo) * h_;
    float* c_prev = cells_.data() + (s * n + lo) * h_;
    backend::for_each_2d(rows, h_, kernels::LstmCellForward{a, c_prev, c_prev + n * h_, h, h_});
    // Mixed precision: h is stored in fp16 (the next step's and dW_hh's GEMM input; the device
    // multiplies GEMM inputs as fp16).
    if (half) backend::for_each(rows * h_, kernels::RoundToHalf{h, h});
  }
}

Tensor LSTM::backward(const Tensor& dy, Context& ctx) {
  const std::size_t t = input_.dim(0), n = input_.dim(1), g4 = 4 * h_;
  Buffer<float> da(t * n * g4);
  over_batch(n, [&](std::size_t lo, std::size_t hi) { backward_steps(dy, da.data(), t, n, lo, hi - lo, ctx.half); });
  // Weight gradients over all steps: dW_ih = da^T x, dW_hh = da^T h_{t-1}, db = da^T 1 (a GEMM reads
  // da by rows; a sum per column strides 4H floats a term and took a tenth of the layer's time).
  backend::gemm(true, false, g4, in_, t * n, 1.0f, da.data(), g4, input_.data(), in_, 0.0f, w_ih.grad.data(), in_);
  backend::gemm(true, false, g4, h_, t * n, 1.0f, da.data(), g4, hidden_.data(), h_, 0.0f, w_hh.grad.data(), h_);
  Buffer<float> ones(t * n);
  backend::for_each(t * n, kernels::Fill{ones.data(), 1.0f});
  backend::gemm(true, false, g4, 1, t * n, 1.0f, da.data(), g4, ones.data(), 1, 0.0f, bias.grad.data(), 1);
  grads_ready(ctx);
  Buffer<float> dxt(t * n * in_);
  backend::gemm(false, false, t * n, in_, g4, 1.0f, da.data(), g4, w_ih.value.data(), in_, 0.0f, dxt.data(), in_);
  Tensor dx({n, t, in_});
  backend::for_each(n * t, kernels::SwapAxes{dxt.data(), dx.data(), t, n, in_}, in_);
  return dx;
}

// Backpropagation through time for batch rows [lo, lo + rows): the gate gradients da ([T, N, 4H]).
void LSTM::backward_steps(const Tensor& dy, float* da, std::size_t t, std::size_t n, std::size_t lo, std::size_t rows,
                          bool half) {
  const std::size_t g4 = 4 * h_;
  Buffer<float> dh(rows * h_), dc(rows * h_), dh_next(rows * h_);
  backend::for_each(rows * h_, kernels::Fill{dc.data(), 0.0f});
  backend::for_each(rows * h_, kernels::Fill{dh_next.data(), 0.0f});
  for (std::size_t s = t; s-- > 0;) {
    backend::for_each_2d(rows, h_, kernels::LstmStepGrad{dy.data() + lo * t * h_, dh_next.data(), dh.data(), t, s, h_});
    float* das = da + (s * n + lo) * g4;
    const float* c_prev = cells_.data() + (s * n + lo) * h_;
    backend::for_each_2d(rows, h_, kernels::LstmCellBackward{gates_.data() + (s * n + lo) * g4, c_prev, c_prev + n * h_,
                                                             dh.data(), dc.data(), das, h_});
    if (half) backend::for_each(rows * g4, kernels::RoundToHalf{das, das});  // fp16 gate gradients, as h
    // dh_{t-1} = da_t W_hh (none before the first step)
    if (s > 0) backend::gemm(false, false, rows, h_, g4, 1.0f, das, g4, w_hh.value.data(), h_, 0.0f, dh_next.data(), h_);
  }
}

}  // namespace gradsync::trainer
