// Finite-difference gradient checks for every layer type, plus the hook order contract.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "layer_checks.hpp"
#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/layers.hpp"
#include "gradsync/trainer/model.hpp"

using namespace gradsync::trainer;
using test::GradCheck;
using test::init;
using test::random_tensor;
using test::separated;

TEST_CASE("Conv2d gradients (stride, padding, bias)", "[trainer][gradcheck]") {
  for (auto [k, s, p] : {std::tuple{3, 1, 1}, std::tuple{3, 2, 1}, std::tuple{1, 2, 0}, std::tuple{5, 1, 2}}) {
    Conv2d conv("conv", 3, 4, k, s, p, true);
    init(conv);
    CHECK(GradCheck{}.run(conv, random_tensor({2, 3, 7, 6}, 11)) > 0);
  }
  Conv2d nobias("conv_nobias", 2, 3, 3, 1, 0, false);
  init(nobias);
  GradCheck{}.run(nobias, random_tensor({3, 2, 5, 5}, 12));
}

// Per-image (padded-width form at stride 1, plain im2col otherwise) and batched lowering: each
// passes the finite-difference check, and both give the same output and gradients.
TEST_CASE("Conv2d per-image and batched lowerings agree", "[trainer][gradcheck]") {
  using L = Conv2d::Lowering;
  for (auto [k, s, p, bias] : {std::tuple{3, 1, 1, false}, std::tuple{3, 1, 0, true}, std::tuple{5, 1, 2, true},
                               std::tuple{3, 2, 1, true}, std::tuple{1, 1, 0, false}}) {
    CAPTURE(k, s, p, bias);
    const Tensor x = random_tensor({3, 2, 9, 7}, 21);
    std::vector<Tensor> out, dx, dw;
    for (L lowering : {L::per_image, L::batched}) {
      Conv2d conv("conv", 2, 3, k, s, p, bias);
      init(conv);
      conv.set_lowering(lowering);
      CHECK(GradCheck{}.run(conv, x) > 0);
      Context ctx{.training = true};
      out.push_back(conv.forward(x, ctx));
      dx.push_back(conv.backward(random_tensor(out.back().shape(), 22), ctx));
      dw.push_back(conv.weight.grad);
    }
    for (auto* pair : {&out, &dx, &dw}) {
      const auto& a = (*pair)[0];
      const auto& b = (*pair)[1];
      REQUIRE(a.shape() == b.shape());
      for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-5));
    }
  }
}

TEST_CASE("im2col/col2im: the device's element forms give the host's row forms' bits", "[trainer][twin]") {
  // Rows (image, ...) of a chunk of 2 images; geometries with padding, stride and a 1x1 kernel.
  for (auto [k, s, p] : {std::tuple{3, 1, 1}, std::tuple{3, 2, 1}, std::tuple{5, 1, 2}, std::tuple{1, 2, 0}, std::tuple{2, 2, 1}}) {
    CAPTURE(k, s, p);
    const std::size_t n = 2, c = 3, h = 7, w = 6, oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    const std::size_t rows = c * k * k, ld = n * oh * ow;
    const Tensor x = random_tensor({n, c, h, w}, 31), col = random_tensor({rows, ld}, 32);
    const kernels::Im2col im2col{x.data(), nullptr, c, h, w, std::size_t(k), std::size_t(s), std::size_t(p), oh, ow, ld};
    const kernels::Col2im col2im{col.data(), nullptr, c, h, w, std::size_t(k), std::size_t(s), std::size_t(p), oh, ow, ld};
    Tensor by_row({rows, ld}, 7.0f), by_element({rows, ld}, 7.0f);
    auto a = im2col, b = im2col;
    a.col = by_row.data();
    b.col = by_element.data();
    for (std::size_t r = 0; r < n * rows; ++r) a(r);
    for (std::size_t i = 0; i < n * rows * oh * ow; ++i) gradsync::trainer::detail::ElementOf<kernels::Im2col>{b, oh * ow}(i);
    CHECK(std::memcmp(by_row.data(), by_element.data(), by_row.size() * sizeof(float)) == 0);

    Tensor dx_row({n, c, h, w}, 7.0f), dx_element({n, c, h, w}, 7.0f);
    auto d = col2im, e = col2im;
    d.x = dx_row.data();
    e.x = dx_element.data();
    for (std::size_t r = 0; r < n * c; ++r) d(r);
    for (std::size_t i = 0; i < n * c * h * w; ++i) gradsync::trainer::detail::ElementOf<kernels::Col2im>{e, h * w}(i);
    CHECK(std::memcmp(dx_row.data(), dx_element.data(), dx_row.size() * sizeof(float)) == 0);
  }
}

// MaxPool2d's backward scatters on the host (row form) and gathers each input's gradient over the
// windows covering it on a device (element form): both the bits of adding dy into the argmax in
// output order, with overlapping windows (3x3 stride 2) and ties (equal values: the first in window
// order wins).
TEST_CASE("MaxPool2d backward: the host's scatter and the device's gather give the reference's bits", "[trainer][twin]") {
  for (auto [k, s, p] : {std::tuple{3, 2, 1}, std::tuple{2, 2, 0}, std::tuple{3, 1, 1}}) {
    CAPTURE(k, s, p);
    const std::size_t n = 2, c = 2, h = 7, w = 6, oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    Tensor x = random_tensor({n, c, h, w}, 33);
    for (std::size_t i = 0; i < x.size(); i += 5) x[i] = 0.5f;  // ties
    MaxPool2d pool("pool", std::size_t(k), std::size_t(s), std::size_t(p));
    Context ctx{.training = true};
    const Tensor y = pool.forward(x, ctx), dy = random_tensor(y.shape(), 34);
    const Tensor dx = pool.backward(dy, ctx);
    Tensor want({n, c, h, w}, 0.0f);
    for (std::size_t plane = 0; plane < n * c; ++plane)
      for (std::size_t o = 0; o < oh * ow; ++o) {
        std::size_t arg = 0;
        bool found = false;
        for (std::size_t ky = 0; ky < std::size_t(k); ++ky)
          for (std::size_t kx = 0; kx < std::size_t(k); ++kx) {
            const long iy = long((o / ow) * s + ky) - p, ix = long((o % ow) * s + kx) - p;
            if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
            const std::size_t i = std::size_t(iy) * w + std::size_t(ix);
            if (!found || x[plane * h * w + i] > x[plane * h * w + arg]) arg = i;
            found = true;
          }
        REQUIRE(y[plane * oh * ow + o] == x[plane * h * w + arg]);
        want[plane * h * w + arg] += dy[plane * oh * ow + o];
      }
    CHECK(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(float)) == 0);  // the host's row form

    // The element form, on the arg-max indices the forward pass kept.
    std::vector<std::uint32_t> args(n * c * oh * ow);
    Tensor fwd_y(y.shape());
    const kernels::MaxPoolForward fwd{x.data(), fwd_y.data(), args.data(), h, w, std::size_t(k), std::size_t(s), std::size_t(p), oh, ow};
    for (std::size_t i = 0; i < n * c * oh * ow; ++i) gradsync::trainer::detail::ElementOf<kernels::MaxPoolForward>{fwd, oh * ow}(i);
    CHECK(std::memcmp(fwd_y.data(), y.data(), y.size() * sizeof(float)) == 0);
    Tensor gathered({n, c, h, w}, 7.0f);
    const kernels::MaxPoolBackward bwd{dy.data(), args.data(), gathered.data(), w, std::size_t(k), std::size_t(s),
                                       std::size_t(p), oh, ow, h * w};
    for (std::size_t i = 0; i < n * c * h * w; ++i) gradsync::trainer::detail::ElementOf<kernels::MaxPoolBackward>{bwd, h * w}(i);
    CHECK(std::memcmp(gathered.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

// Batch norm's host row forms load a plane's per-channel values once; the device's element forms
// read them per element: the same arithmetic, so the same bits.
TEST_CASE("BatchNorm2d kernels: the host's row forms give the element forms' bits", "[trainer][twin]") {
  const std::size_t n = 3, c = 4, s = 37, planes = n * c;
  const Tensor x = random_tensor({n, c, s}, 41), dy = random_tensor({n, c, s}, 42), xhat = random_tensor({n, c, s}, 43);
  const Tensor mean = random_tensor({c}, 44), inv_std = random_tensor({c}, 45, 0.5f, 2.0f), gamma = random_tensor({c}, 46),
               beta = random_tensor({c}, 47), dgamma = random_tensor({c}, 48), dbeta = random_tensor({c}, 49);
  {
    Tensor h_row({n, c, s}, 7.0f), y_row({n, c, s}, 7.0f), h_el({n, c, s}, 7.0f), y_el({n, c, s}, 7.0f);
    const kernels::BnNormalize row{x.data(), mean.data(), inv_std.data(), gamma.data(), beta.data(), h_row.data(), y_row.data(), c, s};
    const kernels::BnNormalize el{x.data(), mean.data(), inv_std.data(), gamma.data(), beta.data(), h_el.data(), y_el.data(), c, s};
    for (std::size_t r = 0; r < planes; ++r) gradsync::trainer::detail::RowLoop<kernels::BnNormalize>{row, s}(r);
    for (std::size_t i = 0; i < planes * s; ++i) gradsync::trainer::detail::ElementOf<kernels::BnNormalize>{el, s}(i);
    CHECK(std::memcmp(h_row.data(), h_el.data(), h_el.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(y_row.data(), y_el.data(), y_el.size() * sizeof(float)) == 0);
    CHECK(h_row[s + 5] == (x[s + 5] - mean[1]) * inv_std[1]);  // plane 1 is channel 1
  }
  {
    Tensor row_dx({n, c, s}, 7.0f), el_dx({n, c, s}, 7.0f);
    const float inv_m = 1.0f / float(n * s);
    const kernels::BnInputGrad row{dy.data(), xhat.data(), gamma.data(), inv_std.data(), dgamma.data(), dbeta.data(), row_dx.data(), c, s, inv_m};
    const kernels::BnInputGrad el{dy.data(), xhat.data(), gamma.data(), inv_std.data(), dgamma.data(), dbeta.data(), el_dx.data(), c, s, inv_m};
    for (std::size_t r = 0; r < planes; ++r) gradsync::trainer::detail::RowLoop<kernels::BnInputGrad>{row, s}(r);
    for (std::size_t i = 0; i < planes * s; ++i) gradsync::trainer::detail::ElementOf<kernels::BnInputGrad>{el, s}(i);
    CHECK(std::memcmp(row_dx.data(), el_dx.data(), el_dx.size() * sizeof(float)) == 0);
  }
}

// Per-plane moments combined per channel (Chan et al.) against a two-pass variance in double, on
// values whose mean is 10^5 times their spread (a one-pass sum of squares in float cancels to noise)
// and whose planes' means differ.
TEST_CASE("BatchNorm2d statistics: per-plane moments combine to the channel's mean and variance", "[trainer]") {
  const std::size_t n = 5, c = 3, s = 29;
  Tensor x = random_tensor({n, c, s}, 55);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t ch = 0; ch < c; ++ch)
      for (std::size_t j = 0; j < s; ++j) x[(i * c + ch) * s + j] = 1000.0f + 0.002f * float(i) + 0.01f * x[(i * c + ch) * s + j];
  std::vector<float> sum(n * c), m2(n * c), mean(c), var(c);
  for (std::size_t plane = 0; plane < n * c; ++plane) kernels::PlaneMoments{x.data(), sum.data(), m2.data(), s}(plane);
  for (std::size_t ch = 0; ch < c; ++ch) kernels::ChannelMoments{sum.data(), m2.data(), mean.data(), var.data(), n, c, s}(ch);
  for (std::size_t ch = 0; ch < c; ++ch) {
    double m = 0.0, v = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < s; ++j) m += x[(i * c + ch) * s + j];
    m /= double(n * s);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < s; ++j) v += (x[(i * c + ch) * s + j] - m) * (x[(i * c + ch) * s + j] - m);
    v /= double(n * s);
    CHECK(mean[ch] == Approx(m).epsilon(1e-6));
    CHECK(var[ch] == Approx(v).epsilon(1e-3));
  }
}

// The LSTM cell's host row forms take the activations from Eigen's vectorized logistic and tanh, the
// element forms (a device's) from libm: a few ulp apart, never more.
TEST_CASE("LSTM cell: the host's row forms agree with the element forms", "[trainer][twin]") {
  const std::size_t n = 3, hidden = 37;
  const Tensor pre = random_tensor({n, 4 * hidden}, 51, -9.0f, 9.0f), c_prev = random_tensor({n, hidden}, 52, -3.0f, 3.0f);
  Tensor a_row = pre, a_el = pre, c_row({n, hidden}), c_el({n, hidden}), h_row({n, hidden}), h_el({n, hidden});
  const kernels::LstmCellForward row{a_row.data(), c_prev.data(), c_row.data(), h_row.data(), hidden};
  const kernels::LstmCellForward el{a_el.data(), c_prev.data(), c_el.data(), h_el.data(), hidden};
  for (std::size_t r = 0; r < n; ++r) row(r);
  for (std::size_t i = 0; i < n * hidden; ++i) gradsync::trainer::detail::ElementOf<kernels::LstmCellForward>{el, hidden}(i);
  auto close = [](const Tensor& a, const Tensor& b) {
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(2e-6).epsilon(4e-6));
  };
  close(a_row, a_el);
  close(c_row, c_el);
  close(h_row, h_el);
  CHECK(a_row[0] == Approx(1.0f / (1.0f + std::exp(-pre[0]))).epsilon(1e-6));

  const Tensor dh = random_tensor({n, hidden}, 53), dc_next = random_tensor({n, hidden}, 54);
  Tensor dc_row = dc_next, dc_el = dc_next, da_row({n, 4 * hidden}), da_el({n, 4 * hidden});
  const kernels::LstmCellBackward brow{a_el.data(), c_prev.data(), c_el.data(), dh.data(), dc_row.data(), da_row.data(), hidden};
  const kernels::LstmCellBackward bel{a_el.data(), c_prev.data(), c_el.data(), dh.data(), dc_el.data(), da_el.data(), hidden};
  for (std::size_t r = 0; r < n; ++r) brow(r);
  for (std::size_t i = 0; i < n * hidden; ++i) gradsync::trainer::detail::ElementOf<kernels::LstmCellBackward>{bel, hidden}(i);
  close(da_row, da_el);
  close(dc_row, dc_el);
}

TEST_CASE("BatchNorm2d gradients in train mode", "[trainer][gradcheck]") { test::check_batchnorm_gradients(); }

TEST_CASE("BatchNorm2d eval mode uses running statistics", "[trainer]") {
  BatchNorm2d bn("bn", 2, 1.0f);  // momentum 1: running stats = last batch's
  Tensor x = random_tensor({8, 2, 2, 2}, 15, 1.0f, 3.0f);
  Context train{.training = true}, eval{};
  Tensor yt = bn.forward(x, train);
  Tensor ye = bn.forward(x, eval);
  // Eval uses the unbiased variance: M/(M-1) larger, so outputs shrink by sqrt((M-1)/M).
  const float shrink = std::sqrt(31.0f / 32.0f);
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(ye[i] == Approx(yt[i] * shrink).margin(1e-4));
}

TEST_CASE("ReLU, MaxPool2d, GlobalAvgPool, Flatten gradients", "[trainer][gradcheck]") {
  ReLU relu;
  GradCheck{}.run(relu, separated({2, 3, 4, 4}, 16));
  MaxPool2d pool("pool", 3, 2, 1);
  GradCheck{}.run(pool, separated({2, 2, 7, 7}, 17));
  MaxPool2d pool2("pool2", 2, 2);
  GradCheck{}.run(pool2, separated({1, 3, 6, 6}, 18));
  GlobalAvgPool gap;
  GradCheck{}.run(gap, random_tensor({3, 4, 3, 5}, 19));
  Flatten flat;
  GradCheck{}.run(flat, random_tensor({2, 3, 2, 2}, 20));
}

TEST_CASE("Linear gradients, 2-D and sequence inputs", "[trainer][gradcheck]") {
  Linear fc("fc", 7, 5);
  init(fc);
  GradCheck{}.run(fc, random_tensor({4, 7}, 21));
  GradCheck{}.run(fc, random_tensor({2, 3, 7}, 22));
}

TEST_CASE("Dropout gradients and statistics", "[trainer][gradcheck]") {
  Dropout drop("drop", 0.5f, 0);
  GradCheck{}.run(drop, random_tensor({4, 50}, 23));
  Context ctx{.training = true, .seed = 1, .step = 5};
  Tensor x(Shape{10000}, 1.0f);
  Tensor y = drop.forward(x, ctx);
  const auto zeros = std::count(y.data(), y.data() + y.size(), 0.0f);
  CHECK(zeros > 4700);
  CHECK(zeros < 5300);
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE((y[i] == 0.0f || y[i] == 2.0f));
  Context eval{};
  Tensor ye = drop.forward(x, eval);
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(ye[i] == 1.0f);
}

TEST_CASE("Residual add gradients, identity and projection shortcuts", "[trainer][gradcheck]") {
  {
    auto main = std::make_unique<Sequential>("main");
    main->emplace<Conv2d>("main.conv", 3, 3, 3, 1, 1, false);
    main->emplace<BatchNorm2d>("main.bn", 3);
    Residual block("block", std::move(main), nullptr);
    init(block);
    GradCheck{.eps = 1e-3}.run(block, random_tensor({2, 3, 4, 4}, 24));
  }
  {
    auto main = std::make_unique<Sequential>("main");
    main->emplace<Conv2d>("main.conv", 2, 4, 3, 2, 1, true);
    auto sc = std::make_unique<Sequential>("sc");
    sc->emplace<Conv2d>("sc.conv", 2, 4, 1, 2, 0, true);
    Residual block("block", std::move(main), std::move(sc), false);
    init(block);
    GradCheck{}.run(block, random_tensor({2, 2, 5, 5}, 25));
  }
}

TEST_CASE("Embedding gradients", "[trainer][gradcheck]") {
  Embedding emb("emb", 6, 4);
  init(emb);
  Tensor ids({3, 5});
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = float((i * 7) % 6);  // repeated ids accumulate
  GradCheck{.check_input = false}.run(emb, ids);
  Tensor bad({1, 1}, 6.0f);
  Context ctx{.training = true};
  CHECK_THROWS_WITH(emb.forward(bad, ctx), Catch::Contains("outside [0, 6)"));
}

TEST_CASE("LSTM gradients through time", "[trainer][gradcheck]") {
  test::check_lstm_gradients();
}

// The recurrence runs a slice of the batch per thread: 4 samples over 3 threads are slices of 1, 1
// and 2 rows, each with its own state and gate gradients.
TEST_CASE("LSTM gradients through time, the batch split over threads", "[trainer][gradcheck]") {
  host::set_threads(3);
  LSTM lstm("lstm", 3, 4);
  init(lstm);
  GradCheck{.eps = 1e-3, .samples = 30}.run(lstm, random_tensor({4, 5, 3}, 29));
  host::set_threads(1);
}

TEST_CASE("Softmax cross-entropy gradient and accuracy count", "[trainer][gradcheck]") {
  Tensor logits = random_tensor({5, 4}, 28, -2.0f, 2.0f);
  std::vector<std::int32_t> labels{0, 3, 1, 2, 3};
  SoftmaxCrossEntropy ce;
  ce.forward(logits, labels);
  Tensor d = ce.backward();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float old = logits[i];
    logits[i] = old + 1e-2f;
    const double up = SoftmaxCrossEntropy{}.forward(logits, labels);
    logits[i] = old - 1e-2f;
    const double down = SoftmaxCrossEntropy{}.forward(logits, labels);
    logits[i] = old;
    REQUIRE(d[i] == Approx((up - down) / 2e-2).margin(1e-3));
  }
  std::size_t expected = 0;
  for (std::size_t r = 0; r < 5; ++r)
    expected += std::max_element(logits.data() + r * 4, logits.data() + r * 4 + 4) - (logits.data() + r * 4) == labels[r];
  CHECK(ce.correct() == expected);
  std::vector<std::int32_t> bad{0, 4, 1, 2, 3};
  CHECK_THROWS_WITH(ce.forward(logits, bad), Catch::Contains("label 4 outside [0, 4)"));
}

TEST_CASE("A whole small model passes the gradient check", "[trainer][gradcheck]") {
  for (const char* name : {"resnet20", "alexnet-bn"}) {
    auto model = make_model({.name = name, .width = 0.125, .input = {1, 12, 12}, .classes = 3});
    model->initialize(5);
    // GradCheck runs on a Module. Many ReLUs: a small step keeps kinks out of the differences.
    struct Adapter final : Module {
      Model& m;
      explicit Adapter(Model& model) : Module("model"), m(model) {}
      Tensor backward(const Tensor& dy, Context& c) override { return m.backward(dy, c); }
      void collect_params(std::vector<Param*>& out) override { out = m.params(); }
      Tensor do_forward(const Tensor& x, Context& c) override { return m.forward(x, c); }
    } adapter(*model);
    GradCheck{.eps = 1e-4, .tolerance = 3e-2, .floor = 0.3, .samples = 3}.run(adapter, random_tensor({4, 1, 12, 12}, 29));
  }
}

namespace {
struct Recorder final : StepHooks {
  std::vector<std::pair<char, std::size_t>> events;
  void before_forward(std::span<Param* const> ps) override { for (auto* p : ps) events.emplace_back('f', p->index); }
  void after_backward(std::span<Param* const> ps) override {
    for (auto it = ps.rbegin(); it != ps.rend(); ++it) events.emplace_back('b', (*it)->index);
  }
};
}  // namespace

TEST_CASE("Hooks: forward order before compute, every gradient once in reverse order", "[trainer]") {
  for (const char* name : {"resnet20", "lstm-lm", "vgg11"}) {
    ModelConfig cfg{.name = name, .width = 0.125, .input = {1, 16, 16}, .classes = 10};
    if (std::string(name) == "lstm-lm") cfg.input = {4};
    auto model = make_model(cfg);
    model->initialize(1);
    Recorder rec;
    Context ctx{.training = true, .hooks = &rec};
    Tensor x = std::string(name) == "lstm-lm" ? Tensor({2, 4}, 1.0f) : random_tensor({2, 1, 16, 16}, 30);
    Tensor y = model->forward(x, ctx);
    model->backward(random_tensor(y.shape(), 31), ctx);
    const std::size_t n = model->params().size();
    REQUIRE(rec.events.size() == 2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(rec.events[i] == std::pair<char, std::size_t>{'f', i});
      REQUIRE(rec.events[n + i] == std::pair<char, std::size_t>{'b', n - 1 - i});
    }
  }
}
