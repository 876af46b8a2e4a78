// Finite-difference gradient checks for every layer type, plus the hook order contract.
#include <algorithm>
#include <cstring>
#include <numeric>

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

// MaxPool2d's backward gathers each input's gradient over the windows covering it (one element per
// device thread): the same bits as adding dy into the argmax in output order, with overlapping
// windows (3x3 stride 2) and ties (equal values: the first in window order wins).
TEST_CASE("MaxPool2d backward: the gather gives a scatter's bits", "[trainer][twin]") {
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
    CHECK(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(float)) == 0);
  }
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
