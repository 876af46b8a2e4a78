// oneDNN's convolutions (the host build's default, onednn.hpp) against the im2col reference on
// random shapes, split over teams, and their run-to-run determinism.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "layer_checks.hpp"
#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/onednn.hpp"

using namespace gradsync::trainer;
using test::init;
using test::random_tensor;

namespace {
struct Geometry {
  std::size_t n, in, out, h, w, k, s, p;
  bool bias;
};

struct Result {
  Tensor y, dx, dw, db;
};

// One training step of a fresh layer (parameters seeded alike for every lowering).
Result step(const Geometry& g, Conv2d::Lowering lowering, std::uint64_t seed) {
  Conv2d conv("conv", g.in, g.out, g.k, g.s, g.p, g.bias);
  init(conv, seed);
  conv.set_lowering(lowering);
  const Tensor x = random_tensor({g.n, g.in, g.h, g.w}, seed + 1);
  Context ctx{.training = true};
  Result r;
  r.y = conv.forward(x, ctx);
  r.dx = conv.backward(random_tensor(r.y.shape(), seed + 2), ctx);
  r.dw = conv.weight.grad;
  if (g.bias) r.db = conv.bias.grad;
  return r;
}

void require_close(const Tensor& got, const Tensor& want, const char* what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  float scale = 1.0f;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::fabs(want[i]));
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(std::fabs(got[i] - want[i]) <= 2e-5f * scale);
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("oneDNN convolutions match the im2col reference on random shapes", "[trainer][onednn]") {
  std::mt19937_64 rng(41);
  auto pick = [&](std::initializer_list<std::size_t> v) { return *(v.begin() + rng() % v.size()); };
  for (int c = 0; c < 40; ++c) {
    Geometry g{};
    g.n = pick({1, 3});
    g.in = pick({1, 3, 16, 20});  // plain (first-layer kernels), blocked, blocked with padded channels
    g.out = pick({4, 16, 33});
    g.k = pick({1, 3, 5});
    g.s = pick({1, 2});
    g.p = pick({0, 1});
    g.h = g.k + rng() % 9;  // odd and even sizes from the kernel up
    g.w = g.k + rng() % 9;
    g.bias = rng() % 2 == 0;
    const int team = c % 3 == 0 ? 2 : 1;  // 3 images over 2 members: two slice sizes
    CAPTURE(c, g.n, g.in, g.out, g.h, g.w, g.k, g.s, g.p, g.bias, team);
    host::set_threads(team);
    const Result want = step(g, Conv2d::Lowering::per_image, 100 + c);
    const Result got = step(g, Conv2d::Lowering::automatic, 100 + c);
    host::set_threads(1);
    require_close(got.y, want.y, "output");
    require_close(got.dx, want.dx, "input gradient");
    require_close(got.dw, want.dw, "weight gradient");
    if (g.bias) require_close(got.db, want.db, "bias gradient");
  }
}

TEST_CASE("oneDNN convolutions give the same bits every run for a team size", "[trainer][onednn]") {
  const Geometry g{6, 16, 32, 14, 13, 3, 1, 1, true};
  for (const int team : {1, 2}) {
    CAPTURE(team);
    host::set_threads(team);
    const Result a = step(g, Conv2d::Lowering::automatic, 7);
    Tensor hold({1 << 16}, 0.0f);  // shifts the next run's buffers
    const Result b = step(g, Conv2d::Lowering::automatic, 7);
    host::set_threads(1);
    CHECK(same_bits(a.y, b.y));
    CHECK(same_bits(a.dx, b.dx));
    CHECK(same_bits(a.dw, b.dw));
    CHECK(same_bits(a.db, b.db));
  }
}

TEST_CASE("oneDNN picks optimized kernels, not its reference ones", "[trainer][onednn]") {
  for (const std::size_t in : {1, 16}) {  // the first-layer case and a blocked one
    onednn::Convolution conv({.in = in, .out = 32, .kernel = 3, .stride = 1, .pad = 1, .bias = false});
    const Tensor x = random_tensor({4, in, 14, 14}, 3), w = random_tensor({32, in, 3, 3}, 4);
    Tensor y({4, 32, 14, 14});
    conv.forward(x.data(), 4, 14, 14, w.data(), nullptr, y.data(), false);
    REQUIRE(conv.implementations().size() == 3);  // forward, backward data, backward weights
    for (const std::string& impl : conv.implementations()) {
      CAPTURE(in, impl);
      CHECK(impl.rfind("ref", 0) != 0);
    }
  }
}

TEST_CASE("oneDNN convolution: an evaluation between forward and backward is refused, then training goes on",
          "[trainer][onednn]") {
  const Geometry g{4, 3, 16, 9, 9, 3, 1, 1, true};
  Conv2d conv("conv", g.in, g.out, g.k, g.s, g.p, g.bias), ref("ref", g.in, g.out, g.k, g.s, g.p, g.bias);
  init(conv, 9);
  init(ref, 9);
  ref.set_lowering(Conv2d::Lowering::per_image);
  Context train{.training = true}, eval{};
  const Tensor x = random_tensor({g.n, g.in, g.h, g.w}, 10), big = random_tensor({7, g.in, g.h, g.w}, 11);
  require_close(conv.forward(big, eval), ref.forward(big, eval), "evaluation output, another batch size");
  const Tensor y = conv.forward(x, train);
  conv.forward(big, eval);
  const Tensor dy = random_tensor(y.shape(), 12);
  REQUIRE_THROWS_WITH(conv.backward(dy, train), Catch::Contains("no training forward"));
  conv.forward(x, train);
  ref.forward(x, train);
  require_close(conv.backward(dy, train), ref.backward(dy, train), "input gradient");
  require_close(conv.weight.grad, ref.weight.grad, "weight gradient");
}

TEST_CASE("oneDNN convolution: backward without a training forward is refused", "[trainer][onednn]") {
  onednn::Convolution conv({.in = 2, .out = 2, .kernel = 1});
  const Tensor x = random_tensor({1, 2, 3, 3}, 5), w = random_tensor({2, 2, 1, 1}, 6);
  Tensor y({1, 2, 3, 3}), dw({2, 2, 1, 1});
  conv.forward(x.data(), 1, 3, 3, w.data(), nullptr, y.data(), false);
  REQUIRE_THROWS_WITH(conv.backward_weights(y.data(), dw.data(), nullptr),
                      Catch::Contains("no training forward"));
}
