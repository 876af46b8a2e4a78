// The device backend on a GPU (registered only with GRADSYNC_GPU_TESTS): conv, batch norm, linear
// and LSTM forward results against plain host loops on the same inputs, and their backward
// against finite differences of the device forward - the host tests' gradient checks, on device.
// With cuDNN (GRADSYNC_TRAINER_CUDNN) Conv2d's automatic lowering and BatchNorm2d run on cuDNN:
// they are checked against direct loops in double and against the im2col + cuBLAS lowering (the
// host layer's algorithm) on the same inputs, forward and backward, fp32 and mixed.
#include <algorithm>
#include <cmath>
#include <random>

#include "layer_checks.hpp"
#include "small_config.hpp"
#include "gradsync/trainer/half.hpp"
#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/sync.hpp"

using namespace gradsync::trainer;
using test::GradCheck;
using test::init;
using test::random_tensor;
using test::separated;

namespace {
void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol));
  }
}
/// |got - want| <= rel * (largest |want|): cuDNN may pick Winograd or FFT algorithms, whose fp32
/// rounding differs from a direct sum's but stays near fp32's precision.
void require_relative(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  REQUIRE(got.size() == want.size());
  double scale = 1e-30;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i] << ", largest " << scale);
    REQUIRE(std::fabs(double(got[i]) - want[i]) <= rel * scale);
  }
}

Tensor from_values(Shape shape, const std::vector<float>& v) {
  Tensor t(std::move(shape));
  t.from_host(v);
  return t;
}

/// Direct convolution in double (cross-correlation, zero padding): y, and from dy the
/// gradients dx, dw, db.
struct ConvReference {
  std::size_t n, ci, co, h, w, k, stride, pad, oh, ow;
  ConvReference(std::size_t n_, std::size_t ci_, std::size_t co_, std::size_t h_, std::size_t w_, std::size_t k_,
                std::size_t s_, std::size_t p_)
      : n(n_), ci(ci_), co(co_), h(h_), w(w_), k(k_), stride(s_), pad(p_), oh((h_ + 2 * p_ - k_) / s_ + 1),
        ow((w_ + 2 * p_ - k_) / s_ + 1) {}
  // f(image, out channel, in channel, oy, ox, ky, kx, input index) for every tap inside the input.
  template <class F>
  void taps(F&& f) const {
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t o = 0; o < co; ++o)
        for (std::size_t c = 0; c < ci; ++c)
          for (std::size_t oy = 0; oy < oh; ++oy)
            for (std::size_t ox = 0; ox < ow; ++ox)
              for (std::size_t ky = 0; ky < k; ++ky)
                for (std::size_t kx = 0; kx < k; ++kx) {
                  const long iy = long(oy * stride + ky) - long(pad), ix = long(ox * stride + kx) - long(pad);
                  if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
                  f(b, o, c, oy, ox, ky, kx, ((b * ci + c) * h + std::size_t(iy)) * w + std::size_t(ix));
                }
  }
  std::size_t at_y(std::size_t b, std::size_t o, std::size_t oy, std::size_t ox) const {
    return ((b * co + o) * oh + oy) * ow + ox;
  }
  std::size_t at_w(std::size_t o, std::size_t c, std::size_t ky, std::size_t kx) const {
    return ((o * ci + c) * k + ky) * k + kx;
  }
  std::vector<float> forward(const std::vector<float>& x, const std::vector<float>& wt, const std::vector<float>& bias) const {
    std::vector<double> y(n * co * oh * ow, 0.0);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = bias.empty() ? 0.0 : bias[(i / (oh * ow)) % co];
    taps([&](auto b, auto o, auto c, auto oy, auto ox, auto ky, auto kx, std::size_t xi) {
      y[at_y(b, o, oy, ox)] += double(wt[at_w(o, c, ky, kx)]) * x[xi];
    });
    return {y.begin(), y.end()};
  }
  void backward(const std::vector<float>& x, const std::vector<float>& wt, const std::vector<float>& dy,
                std::vector<float>& dx, std::vector<float>& dw, std::vector<float>& db) const {
    std::vector<double> gx(x.size(), 0.0), gw(wt.size(), 0.0), gb(co, 0.0);
    taps([&](auto b, auto o, auto c, auto oy, auto ox, auto ky, auto kx, std::size_t xi) {
      const double d = dy[at_y(b, o, oy, ox)];
      gx[xi] += d * wt[at_w(o, c, ky, kx)];
      gw[at_w(o, c, ky, kx)] += d * x[xi];
    });
    for (std::size_t i = 0; i < dy.size(); ++i) gb[(i / (oh * ow)) % co] += dy[i];
    dx.assign(gx.begin(), gx.end());
    dw.assign(gw.begin(), gw.end());
    db.assign(gb.begin(), gb.end());
  }
};

/// Rounds a host vector to fp16 values (mixed precision's storage).
std::vector<float> halved(std::vector<float> v) {
  for (float& x : v) x = round_to_half(x);
  return v;
}

/// Mixed precision's GEMM/convolution mode for this thread, reset on scope exit.
struct Fp16Math {
  explicit Fp16Math(bool on) { backend::set_fp16_gemm(on); }
  ~Fp16Math() { backend::set_fp16_gemm(false); }
};

struct ConvCase {
  std::size_t k, stride, pad;
  bool bias;
};
constexpr ConvCase conv_cases[] = {{3, 1, 1, false}, {3, 2, 1, true}, {1, 2, 0, false}, {5, 1, 2, true}, {3, 1, 0, true}};
}  // namespace

TEST_CASE("Device Conv2d matches direct convolution on the host - gradients check", "[gpu]") {
  const std::size_t n = 2, ci = 3, co = 4, h = 7, w = 6, k = 3, stride = 2, pad = 1;
  Conv2d conv("conv", ci, co, k, stride, pad, true);
  init(conv);
  const Tensor x = random_tensor({n, ci, h, w}, 11);
  Context ctx{.training = true};
  const std::vector<float> y = conv.forward(x, ctx).to_host();
  const ConvReference ref(n, ci, co, h, w, k, stride, pad);
  require_close(y, ref.forward(x.to_host(), conv.weight.value.to_host(), conv.bias.value.to_host()));
  GradCheck{}.run(conv, x);
}

// fp32: forward, input gradient, weight and bias gradients of the automatic lowering (cuDNN where
// built with it) within 1e-4 of the largest value of a double-precision direct convolution, and
// within 1e-4 of the im2col + cuBLAS lowering's on the same inputs; each lowering passes the
// finite-difference check. Batch sizes alternate, so each layer keeps one cuDNN plan per shape.
TEST_CASE("Device Conv2d in fp32: automatic (cuDNN) and im2col lowerings against direct loops", "[gpu][cudnn]") {
  using L = Conv2d::Lowering;
  for (const ConvCase& cc : conv_cases) {
    CAPTURE(cc.k, cc.stride, cc.pad, cc.bias);
    const std::size_t ci = 5, co = 4, h = 9, w = 7;
    Conv2d cudnn("conv", ci, co, cc.k, cc.stride, cc.pad, cc.bias), im2col("conv", ci, co, cc.k, cc.stride, cc.pad, cc.bias);
    init(cudnn);
    init(im2col);
    im2col.set_lowering(L::batched);
    for (std::size_t n : {3, 2, 3}) {
      CAPTURE(n);
      const ConvReference ref(n, ci, co, h, w, cc.k, cc.stride, cc.pad);
      const Tensor x = random_tensor({n, ci, h, w}, 40 + n);
      const Tensor dy = random_tensor({n, co, ref.oh, ref.ow}, 50 + n);
      const std::vector<float> xv = x.to_host(), wv = cudnn.weight.value.to_host(),
                               bv = cc.bias ? cudnn.bias.value.to_host() : std::vector<float>{};
      std::vector<float> dx, dw, db;
      ref.backward(xv, wv, dy.to_host(), dx, dw, db);
      const std::vector<float> y = ref.forward(xv, wv, bv);
      for (Conv2d* conv : {&cudnn, &im2col}) {
        Context ctx{.training = true};
        require_relative(conv->forward(x, ctx).to_host(), y, 1e-4);
        require_relative(conv->backward(dy, ctx).to_host(), dx, 1e-4);
        require_relative(conv->weight.grad.to_host(), dw, 1e-4);
        if (cc.bias) require_relative(conv->bias.grad.to_host(), db, 1e-4);
      }
      Context ctx{.training = true};
      require_relative(cudnn.forward(x, ctx).to_host(), im2col.forward(x, ctx).to_host(), 1e-4);
    }
    GradCheck{}.run(cudnn, random_tensor({2, ci, h, w}, 61));
  }
}

// Inputs 1 + 2^-12 against weights (or output gradients) 1: every partial sum is exact in fp32,
// while TF32 (10 mantissa bits) would read 1 + 2^-12 as 1 - a loss of count * 2^-12 that the
// bound below (a quarter of it) catches in each of the three convolutions.
TEST_CASE("Device Conv2d in fp32 does not round inputs to TF32", "[gpu][cudnn]") {
  const std::size_t n = 2, ci = 3, co = 2, h = 8, w = 8, k = 3;
  const float v = 1.0f + 0x1p-12f;
  Conv2d conv("conv", ci, co, k, 1, 1, false);
  conv.weight.value.from_host(std::vector<float>(co * ci * k * k, 1.0f));
  const ConvReference ref(n, ci, co, h, w, k, 1, 1);
  const std::vector<float> xv(n * ci * h * w, v), dyv(n * co * h * w, 1.0f);
  std::vector<float> dx, dw, db;
  ref.backward(xv, std::vector<float>(co * ci * k * k, 1.0f), dyv, dx, dw, db);
  Context ctx{.training = true};
  const std::vector<float> y = conv.forward(from_values({n, ci, h, w}, xv), ctx).to_host();
  const std::vector<float> want_y = ref.forward(xv, std::vector<float>(co * ci * k * k, 1.0f), {});
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - want_y[i]) < want_y[i] / v * 0x1p-14f);
  // Backward data with dy = 1 + 2^-12 and w = 1; backward filter with x = 1 + 2^-12 and dy = 1.
  const std::vector<float> gx = conv.backward(from_values({n, co, h, w}, std::vector<float>(dyv.size(), v)), ctx).to_host();
  for (std::size_t i = 0; i < gx.size(); ++i) REQUIRE(std::fabs(gx[i] - dx[i] * v) < dx[i] * 0x1p-14f);
  conv.forward(from_values({n, ci, h, w}, xv), ctx);
  conv.backward(from_values({n, co, h, w}, dyv), ctx);
  const std::vector<float> gw = conv.weight.grad.to_host();
  for (std::size_t i = 0; i < gw.size(); ++i) REQUIRE(std::fabs(gw[i] - dw[i]) < dw[i] / v * 0x1p-14f);
}

// Mixed precision: inputs, weights and output gradients are fp16 values; products of fp16 values
// are exact in fp32, so with fp32 accumulation both lowerings stay within 1e-4 of the largest
// value of the double-precision sums (outputs are not rounded here: that is Module::forward's).
TEST_CASE("Device Conv2d under fp16 math: fp16 inputs with fp32 accumulation", "[gpu][cudnn]") {
  using L = Conv2d::Lowering;
  const Fp16Math fp16(true);
  for (const ConvCase& cc : conv_cases) {
    CAPTURE(cc.k, cc.stride, cc.pad, cc.bias);
    const std::size_t n = 4, ci = 8, co = 8, h = 9, w = 9;
    const ConvReference ref(n, ci, co, h, w, cc.k, cc.stride, cc.pad);
    const std::vector<float> xv = halved(random_tensor({n, ci, h, w}, 71).to_host());
    const std::vector<float> dyv = halved(random_tensor({n, co, ref.oh, ref.ow}, 72).to_host());
    for (L lowering : {L::automatic, L::batched}) {
      Conv2d conv("conv", ci, co, cc.k, cc.stride, cc.pad, cc.bias);
      init(conv);
      conv.set_lowering(lowering);
      round_to_half(conv.weight.value);
      if (cc.bias) round_to_half(conv.bias.value);
      const std::vector<float> wv = conv.weight.value.to_host(),
                               bv = cc.bias ? conv.bias.value.to_host() : std::vector<float>{};
      std::vector<float> dx, dw, db;
      ref.backward(xv, wv, dyv, dx, dw, db);
      Context ctx{.training = true};
      require_relative(conv.forward(from_values({n, ci, h, w}, xv), ctx).to_host(), ref.forward(xv, wv, bv), 1e-4);
      require_relative(conv.backward(from_values({n, co, ref.oh, ref.ow}, dyv), ctx).to_host(), dx, 1e-4);
      require_relative(conv.weight.grad.to_host(), dw, 1e-4);
      if (cc.bias) require_relative(conv.bias.grad.to_host(), db, 1e-4);
    }
  }
}

// Batch norm (cuDNN where built with it) against the host layer's formulas in double: training
// output from the batch statistics (biased variance), running statistics after one step
// (momentum 0.1, unbiased variance), the eval output from them, and the closed-form backward
// dgamma = sum dy xhat, dbeta = sum dy, dx = gamma inv_std (dy - dbeta / M - xhat dgamma / M);
// all within 1e-4 of the largest value. [N, C, H, W] and [N, C] inputs; finite differences too.
TEST_CASE("Device BatchNorm2d matches the host formulas: forward and running statistics and backward", "[gpu][cudnn]") {
  for (const Shape& shape : {Shape{4, 3, 3, 2}, Shape{6, 5}, Shape{8, 16, 5, 5}}) {
    CAPTURE(to_string(shape));
    const std::size_t n = shape[0], c = shape[1], s = product(shape) / (n * c), m = n * s;
    BatchNorm2d bn("bn", c);
    init(bn);
    const Tensor x = random_tensor(shape, 13, -2.0f, 3.0f), dy = random_tensor(shape, 14);
    Context ctx{.training = true};
    const std::vector<float> y = bn.forward(x, ctx).to_host(), dx = bn.backward(dy, ctx).to_host();
    const std::vector<float> xv = x.to_host(), dyv = dy.to_host(), g = bn.weight.value.to_host(),
                             b = bn.bias.value.to_host();
    std::vector<float> want_y(xv.size()), want_dx(xv.size()), want_eval(xv.size()), dgamma(c), dbeta(c), rmean(c), rvar(c);
    for (std::size_t ch = 0; ch < c; ++ch) {
      auto at = [&](std::size_t i, std::size_t j) { return (i * c + ch) * s + j; };
      double mean = 0, var = 0, dg = 0, db = 0;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < s; ++j) mean += xv[at(i, j)] / double(m);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < s; ++j) var += std::pow(xv[at(i, j)] - mean, 2) / double(m);
      const double inv_std = 1.0 / std::sqrt(var + 1e-5);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < s; ++j) {
          dg += dyv[at(i, j)] * (xv[at(i, j)] - mean) * inv_std;
          db += dyv[at(i, j)];
        }
      dgamma[ch] = float(dg);
      dbeta[ch] = float(db);
      rmean[ch] = float(0.1 * mean);
      rvar[ch] = float(0.9 + 0.1 * var * double(m) / double(m - 1));
      const double eval_inv_std = 1.0 / std::sqrt(double(rvar[ch]) + 1e-5);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < s; ++j) {
          const double xhat = (xv[at(i, j)] - mean) * inv_std;
          want_y[at(i, j)] = float(g[ch] * xhat + b[ch]);
          want_dx[at(i, j)] = float(g[ch] * inv_std * (dyv[at(i, j)] - db / double(m) - xhat * dg / double(m)));
          want_eval[at(i, j)] = float(g[ch] * (xv[at(i, j)] - rmean[ch]) * eval_inv_std + b[ch]);
        }
    }
    require_relative(y, want_y, 1e-4);
    require_relative(dx, want_dx, 1e-4);
    require_relative(bn.weight.grad.to_host(), dgamma, 1e-4);
    require_relative(bn.bias.grad.to_host(), dbeta, 1e-4);
    require_relative(bn.running_mean.to_host(), rmean, 1e-4);
    require_relative(bn.running_var.to_host(), rvar, 1e-4);
    Context eval{};
    require_relative(bn.forward(x, eval).to_host(), want_eval, 1e-4);
  }
  test::check_batchnorm_gradients();
}

// One output (forward) or input element (backward, a gather over the covering windows) per thread.
TEST_CASE("Device MaxPool2d: gradients check", "[gpu]") {
  MaxPool2d pool("pool", 3, 2, 1);
  GradCheck{}.run(pool, separated({2, 2, 7, 7}, 17));
  MaxPool2d pool2("pool2", 2, 2);
  GradCheck{}.run(pool2, separated({1, 3, 6, 6}, 18));
}

TEST_CASE("Device Linear (cuBLAS) matches the host product - gradients check", "[gpu]") {
  Linear fc("fc", 5, 3, true);
  init(fc);
  const Tensor x = random_tensor({4, 5}, 21);
  Context ctx{.training = true};
  const std::vector<float> y = fc.forward(x, ctx).to_host(), xv = x.to_host(), wv = fc.weight.value.to_host(),
                           bv = fc.bias.value.to_host();
  std::vector<float> want(4 * 3);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t o = 0; o < 3; ++o) {
      double s = bv[o];
      for (std::size_t i = 0; i < 5; ++i) s += double(xv[r * 5 + i]) * wv[o * 5 + i];
      want[r * 3 + o] = float(s);
    }
  require_close(y, want);
  GradCheck{}.run(fc, x);
}

TEST_CASE("Device LSTM (cuBLAS steps): gradients through time check", "[gpu]") {
  test::check_lstm_gradients();
}

// One rank with the local sync keeps its gradients on the device (SingleRankSync reads none; mixed
// precision unscales them there); a one-rank exact all-reduce reads them, so they are staged
// through host memory. Both train the same ResNet-20: the same weights, up to cuDNN's algorithm
// choice (timed anew in each run) - within 1e-2 of each tensor's largest weight after 8 steps.
TEST_CASE("Device training: one rank on the device matches staging through the host", "[gpu][cudnn]") {
  for (const char* precision : {"fp32", "mixed"}) {
    CAPTURE(precision);
    TrainConfig c = test::small_resnet_config();
    c.ranks = 1;
    c.iterations = 8;
    c.precision = precision;
    const TrainResult on_device = train(c);
    std::vector<std::size_t> sizes;
    for (const auto& [name, n] : make_model(c.model)->layout()) sizes.push_back(n);
    LocalAllReduceGroup group(1, sizes);
    const TrainResult staged = train(c, [&](std::size_t r, const Model&) { return group.rank(r); });
    REQUIRE(on_device.weights.size() == staged.weights.size());
    for (std::size_t t = 0; t < staged.weights.size(); ++t) {
      CAPTURE(t);
      require_relative(on_device.weights[t], staged.weights[t], 1e-2);
    }
    CHECK(std::isfinite(on_device.test_loss));
  }
}
