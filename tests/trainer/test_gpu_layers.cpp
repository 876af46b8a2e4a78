// The device backend on a GPU (registered only with GRADSYNC_GPU_TESTS): conv, batch norm, linear
// and LSTM forward results against plain host loops on the same inputs, and their backward
// against finite differences of the device forward - the host tests' gradient checks, on device.
#include <cmath>
#include <random>

#include "layer_checks.hpp"

using namespace gradsync::trainer;
using test::GradCheck;
using test::init;
using test::random_tensor;

namespace {
void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol));
  }
}
}  // namespace

TEST_CASE("Device Conv2d matches direct convolution on the host - gradients check", "[gpu]") {
  const std::size_t n = 2, ci = 3, co = 4, h = 7, w = 6, k = 3, stride = 2, pad = 1;
  Conv2d conv("conv", ci, co, k, stride, pad, true);
  init(conv);
  const Tensor x = random_tensor({n, ci, h, w}, 11);
  Context ctx{.training = true};
  const std::vector<float> y = conv.forward(x, ctx).to_host(), xv = x.to_host(), wv = conv.weight.value.to_host(),
                           bv = conv.bias.value.to_host();
  const std::size_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  std::vector<float> want(n * co * oh * ow);
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t o = 0; o < co; ++o)
      for (std::size_t oy = 0; oy < oh; ++oy)
        for (std::size_t ox = 0; ox < ow; ++ox) {
          double s = bv[o];
          for (std::size_t c = 0; c < ci; ++c)
            for (std::size_t ky = 0; ky < k; ++ky)
              for (std::size_t kx = 0; kx < k; ++kx) {
                const long iy = long(oy * stride + ky) - long(pad), ix = long(ox * stride + kx) - long(pad);
                if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
                s += double(wv[((o * ci + c) * k + ky) * k + kx]) * xv[((b * ci + c) * h + iy) * w + ix];
              }
          want[((b * co + o) * oh + oy) * ow + ox] = float(s);
        }
  require_close(y, want);
  GradCheck{}.run(conv, x);
}

TEST_CASE("Device BatchNorm2d normalizes like the host formula - gradients check", "[gpu]") {
  BatchNorm2d bn("bn", 3);
  init(bn);
  const Tensor x = random_tensor({4, 3, 3, 2}, 13);
  Context ctx{.training = true};
  const std::vector<float> y = bn.forward(x, ctx).to_host(), xv = x.to_host(), g = bn.weight.value.to_host(),
                           b = bn.bias.value.to_host();
  std::vector<float> want(xv.size());
  for (std::size_t c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 6; ++j) mean += xv[(i * 3 + c) * 6 + j] / 24.0;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 6; ++j) var += std::pow(xv[(i * 3 + c) * 6 + j] - mean, 2) / 24.0;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 6; ++j) {
        const std::size_t at = (i * 3 + c) * 6 + j;
        want[at] = float(g[c] * (xv[at] - mean) / std::sqrt(var + 1e-5) + b[c]);
      }
  }
  require_close(y, want, 1e-3);
  GradCheck{.eps = 1e-3}.run(bn, x);
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
