// Optimizer, schedules and the reference all-reduce.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "gradsync/trainer/optimizer.hpp"
#include "gradsync/trainer/sync.hpp"

using namespace gradsync::trainer;

namespace {
Param make(std::vector<float> w, std::vector<float> g, bool decay, std::size_t index) {
  Param p;
  p.value = Tensor({w.size()});
  p.grad = Tensor({g.size()});
  std::copy(w.begin(), w.end(), p.value.data());
  std::copy(g.begin(), g.end(), p.grad.data());
  p.decay = decay;
  p.index = index;
  return p;
}
}  // namespace

TEST_CASE("SGD with momentum - weight decay only where allowed", "[trainer][optim]") {
  Param w = make({1.0f, -2.0f}, {0.5f, 0.5f}, true, 0);
  Param b = make({1.0f}, {0.5f}, false, 1);
  Optimizer opt({&w, &b}, {.momentum = 0.9f, .weight_decay = 0.1f});
  opt.step(w, 0.1f);
  opt.step(b, 0.1f);
  // v = g + wd w; w -= lr v
  CHECK(w.value[0] == Approx(1.0f - 0.1f * (0.5f + 0.1f)));
  CHECK(w.value[1] == Approx(-2.0f - 0.1f * (0.5f - 0.2f)));
  CHECK(b.value[0] == Approx(1.0f - 0.1f * 0.5f));  // no decay on biases / batch norm
  opt.step(b, 0.1f);                                 // v = 0.9 * 0.5 + 0.5
  CHECK(b.value[0] == Approx(0.95f - 0.1f * 0.95f));
}

TEST_CASE("LARS scales the step by eta |w| / (|g| + wd |w|)", "[trainer][optim]") {
  Param w = make({3.0f, 4.0f}, {0.0f, 0.5f}, true, 0);  // |w| = 5, |g| = 0.5
  Param b = make({1.0f}, {0.5f}, false, 1);
  Optimizer opt({&w, &b}, {.momentum = 0.0f, .weight_decay = 0.0f, .lars = true, .lars_coefficient = 0.001f});
  opt.step(w, 1.0f);
  opt.step(b, 1.0f);
  const float local = 0.001f * 5.0f / 0.5f;
  CHECK(w.value[1] == Approx(4.0f - local * 0.5f));
  CHECK(b.value[0] == Approx(0.5f));  // biases keep plain SGD
}

TEST_CASE("Learning-rate schedules", "[trainer][optim]") {
  LrSchedule cosine(1.0f, "cosine", 10, 110);
  CHECK(cosine(0) == Approx(0.1f));
  CHECK(cosine(9) == Approx(1.0f));
  CHECK(cosine(10) == Approx(1.0f));
  CHECK(cosine(60) == Approx(0.5f));
  CHECK(cosine(109) == Approx(0.0f).margin(1e-3));
  LrSchedule step(1.0f, "step", 0, 100);
  CHECK(step(49) == Approx(1.0f));
  CHECK(step(50) == Approx(0.1f));
  CHECK(step(80) == Approx(0.01f));
  LrSchedule poly(2.0f, "poly", 0, 100);
  CHECK(poly(50) == Approx(0.5f));
  CHECK(LrSchedule(0.3f, "constant", 0, 10)(9) == Approx(0.3f));
  CHECK_THROWS_WITH(LrSchedule(1.0f, "linear", 0, 10), Catch::Contains("unknown learning-rate schedule 'linear'"));
}

TEST_CASE("Local all-reduce: every rank gets the exact mean", "[trainer][sync]") {
  constexpr std::size_t ranks = 3;
  LocalAllReduceGroup group(ranks, {4, 1});
  std::vector<std::vector<float>> a(ranks, std::vector<float>(4)), b(ranks, std::vector<float>(1));
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto sync = group.rank(r);
      for (int it = 0; it < 3; ++it) {
        for (std::size_t i = 0; i < 4; ++i) a[r][i] = float(r * 10 + i + it);
        b[r][0] = float(r);
        sync->gradient_ready(1, b[r]);
        sync->gradient_ready(0, a[r]);
        sync->finish_iteration();
        sync->wait_for(0);
        sync->wait_for(1);
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < 4; ++i) CHECK(a[r][i] == Approx(10.0f + float(i) + 2.0f));
    CHECK(b[r][0] == Approx(1.0f));
  }
  auto sync = group.rank(0);
  std::vector<float> wrong(3);
  CHECK_THROWS_WITH(sync->gradient_ready(0, wrong), Catch::Contains("does not match the layout"));
}
