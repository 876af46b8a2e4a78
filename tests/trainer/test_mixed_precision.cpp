// Mixed precision on the host: fp16 rounding, the loss scaler, ranks agreeing on a skipped step,
// and a short training run against fp32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include <gradsync/gradsync.hpp>

#include "gradsync/trainer/half.hpp"
#include "gradsync/trainer/mixed_precision.hpp"
#include "gradsync/trainer/sync.hpp"
#include "gradsync/trainer/trainer.hpp"
#include "resume.hpp"
#include "small_config.hpp"

using namespace gradsync::trainer;

namespace {
constexpr float inf = std::numeric_limits<float>::infinity();

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Param make(std::vector<float> w, bool decay, std::size_t index) {
  Param p;
  p.name = "p" + std::to_string(index);
  p.value = Tensor({w.size()});
  p.grad = Tensor({w.size()}, 0.0f);
  std::copy(w.begin(), w.end(), p.value.data());
  p.decay = decay;
  p.index = index;
  return p;
}
}  // namespace

TEST_CASE("round_to_half: nearest fp16 value, ties to even, overflow to Inf, subnormals", "[trainer][mixed]") {
  CHECK(round_to_half(1.0f) == 1.0f);
  CHECK(round_to_half(1.0f + 0x1p-11f) == 1.0f);                  // tie: even mantissa (down)
  CHECK(round_to_half(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);    // tie: even mantissa (up)
  CHECK(round_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
  CHECK(round_to_half(-3.14159265f) == -3.140625f);
  CHECK(round_to_half(half_max) == half_max);
  CHECK(round_to_half(65519.0f) == half_max);
  CHECK(round_to_half(65520.0f) == inf);  // halfway to 2^16 rounds to even: Inf
  CHECK(round_to_half(-1e6f) == -inf);
  CHECK(round_to_half(0x1p-24f) == 0x1p-24f);        // smallest subnormal
  CHECK(round_to_half(0x1p-25f) == 0.0f);            // tie to even: zero
  CHECK(round_to_half(3 * 0x1p-25f) == 0x1p-23f);    // tie to even: 2 x 2^-24
  CHECK(round_to_half(0x1p-14f - 0x1p-30f) == 0x1p-14f);  // subnormal rounding up into the normals
  CHECK(std::signbit(round_to_half(-0x1p-30f)));
  CHECK(std::isnan(round_to_half(std::nanf(""))));
  CHECK(round_to_half(-inf) == -inf);
#if defined(__FLT16_MAX__)  // the compiler's own conversion as the reference, over a spread of bit patterns
  std::size_t mismatches = 0;
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65537) {
    const float f = from_bits(std::uint32_t(u));
    const float want = float(static_cast<_Float16>(f)), got = round_to_half(f);
    if (!(std::isnan(want) ? std::isnan(got) : std::memcmp(&want, &got, sizeof got) == 0)) ++mismatches;
  }
  CHECK(mismatches == 0);
#endif
  Tensor t({3});
  t[0] = 1e5f; t[1] = 0.1f; t[2] = -2.0f;
  round_to_half(t);
  CHECK(t[0] == inf);
  CHECK(t[1] == from_bits(0x3dccc000u));  // 0.0999755859375, fp16 0x2e66
  CHECK(t[2] == -2.0f);
}

TEST_CASE("Loss scaler: overflow skips and halves, clean steps grow", "[trainer][mixed]") {
  LossScaler s({.initial_scale = 1024.0f, .growth_interval = 3, .min_scale = 256.0f, .max_scale = 4096.0f});
  CHECK(s.scale() == 1024.0f);
  CHECK_FALSE(s.update(true));
  CHECK(s.scale() == 512.0f);
  CHECK(s.skipped_steps() == 1);
  CHECK(s.update(false));
  CHECK(s.update(false));
  CHECK(s.scale() == 512.0f);
  CHECK_FALSE(s.update(true));  // the overflow restarts the count of clean steps
  CHECK(s.scale() == 256.0f);
  CHECK_FALSE(s.update(true));
  CHECK(s.scale() == 256.0f);   // never below min_scale
  for (int i = 0; i < 3; ++i) CHECK(s.update(false));
  CHECK(s.scale() == 512.0f);   // grew after exactly 3 clean steps
  for (int i = 0; i < 9; ++i) s.update(false);
  CHECK(s.scale() == 4096.0f);  // capped at max_scale
  CHECK(s.skipped_steps() == 3);
  CHECK_THROWS_WITH(LossScaler({.backoff_factor = 1.0f}), Catch::Contains("backoff_factor"));
}

TEST_CASE("Mixed precision unscales exactly and finds Inf or NaN in any tensor and row", "[trainer][mixed]") {
  // Gradients of fp16 values scaled by a power of two come back bit-exact; the second tensor
  // spans two rows of UnscaleCount (4096 values each) and a partial third.
  Param a = make({0.0f, 0.0f, 0.0f, 0.0f}, true, 0), b = make(std::vector<float>(9000, 0.0f), true, 1);
  std::vector<Param*> params{&a, &b};
  MixedPrecision mp(params, {.initial_scale = 1024.0f});
  const std::vector<float> small = {round_to_half(0.1f), round_to_half(-3e-5f), 0x1p-24f, 0.0f};
  auto fill = [&] {
    for (std::size_t i = 0; i < 4; ++i) a.grad[i] = round_to_half(small[i] * mp.scaler().scale());
    for (std::size_t i = 0; i < b.grad.size(); ++i) b.grad[i] = round_to_half(float(i % 7) * 0.25f * mp.scaler().scale());
  };
  fill();
  REQUIRE(mp.unscale(params));
  for (std::size_t i = 0; i < 4; ++i) CHECK(a.grad[i] == small[i]);
  for (std::size_t i = 0; i < b.grad.size(); ++i) REQUIRE(b.grad[i] == float(i % 7) * 0.25f);
  for (const auto& [at, bad] : {std::pair{std::size_t(0), inf}, std::pair{std::size_t(4095), -inf},
                               std::pair{std::size_t(4096), std::nanf("")}, std::pair{std::size_t(8999), inf}}) {
    CAPTURE(at);
    fill();
    b.grad[at] = bad;
    const float scale = mp.scaler().scale();
    CHECK_FALSE(mp.unscale(params));
    CHECK(mp.scaler().scale() == scale / 2);
  }
  fill();
  a.grad[3] = round_to_half(70000.0f);  // beyond fp16: Inf
  CHECK_FALSE(mp.unscale(params));
  CHECK(mp.scaler().skipped_steps() == 5);
}

TEST_CASE("Mixed precision keeps fp32 masters and steps them", "[trainer][mixed]") {
  Param w = make({1.0f + 0x1p-13f, 0.3f}, true, 0);
  std::vector<Param*> params{&w};
  MixedPrecision mp(params, {.initial_scale = 8.0f});
  CHECK(w.value[0] == 1.0f);  // the compute copy is fp16
  CHECK(w.value[1] == round_to_half(0.3f));
  Optimizer opt(params, {.momentum = 0.0f, .weight_decay = 0.0f});
  w.grad[0] = 8.0f * 0x1p-13f;  // scaled gradient
  w.grad[1] = 0.0f;
  REQUIRE(mp.unscale(params));
  mp.step(w, opt, 1.0f);
  // The master moved by 2^-13 from 1 + 2^-13: exactly 1. An fp16 weight update would have lost it.
  mp.swap_masters(params);
  CHECK(w.value[0] == 1.0f);
  CHECK(w.value[1] == 0.3f);
  mp.swap_masters(params);
  CHECK(w.value[1] == round_to_half(0.3f));
}

namespace {
// Two ranks, two tensors; rank 1's tensor 0 overflows in the first iteration only. Returns per
// rank: (step applied? per iteration, final weights, final scale).
struct RankOutcome {
  std::vector<bool> applied;
  std::vector<float> weights;
  float scale = 0;
};
template <class MakeSync>
std::vector<RankOutcome> two_ranks_one_overflows(MakeSync make_sync) {
  std::vector<RankOutcome> out(2);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Param a = make({0.5f, -0.25f, 1.0f}, true, 0), b = make({2.0f}, false, 1);
      std::vector<Param*> params{&a, &b};
      MixedPrecision mp(params, {.initial_scale = 1024.0f});
      Optimizer opt(params, {.momentum = 0.0f, .weight_decay = 0.0f});
      auto sync = make_sync(r);
      for (int it = 0; it < 2; ++it) {
        for (std::size_t i = 0; i < 3; ++i) a.grad[i] = mp.scaler().scale() * 0.01f * float(i + r + 1);
        b.grad[0] = mp.scaler().scale() * 0.02f;
        if (it == 0 && r == 1) a.grad[1] = 1e6f;  // beyond fp16
        for (auto* p : {&b, &a}) {
          round_to_half(p->grad);
          sync->gradient_ready(p->index, p->grad.span());
        }
        sync->finish_iteration();
        sync->wait_for(0);
        sync->wait_for(1);
        const bool apply = mp.unscale(params);
        out[r].applied.push_back(apply);
        if (apply)
          for (auto* p : params) mp.step(*p, opt, 0.5f);
      }
      mp.swap_masters(params);
      out[r].weights = {a.value[0], a.value[1], a.value[2], b.value[0]};
      out[r].scale = mp.scaler().scale();
    });
  for (auto& t : threads) t.join();
  return out;
}
void check_agreement(const std::vector<RankOutcome>& out) {
  for (const auto& o : out) {
    CHECK(o.applied == std::vector<bool>{false, true});  // both skip the overflowed step, both take the next
    CHECK(o.scale == 512.0f);
  }
  CHECK(out[0].weights == out[1].weights);
  // One step of the mean unscaled gradient (0.01 * (i + 1.5) for a, 0.02 for b), lr 0.5.
  CHECK(out[0].weights[0] == Approx(0.5f - 0.5f * 0.015f).epsilon(1e-3));
  CHECK(out[0].weights[3] == Approx(2.0f - 0.5f * 0.02f).epsilon(1e-3));
}
}  // namespace

TEST_CASE("One rank overflows: every rank skips the step (exact local all-reduce)", "[trainer][mixed]") {
  LocalAllReduceGroup group(2, {3, 1});
  check_agreement(two_ranks_one_overflows([&](std::size_t r) { return group.rank(r); }));
}

TEST_CASE("One rank overflows: every rank skips the step (library Synchronizer, check_finite off)",
          "[trainer][mixed]") {
  gradsync::transport::InProcessGroup group(2);
  const gradsync::ModelLayout layout{{"a", 3}, {"b", 1}};
  for (const char* codec : {"fp32", "fp16"}) {
    INFO(codec);
    check_agreement(two_ranks_one_overflows([&](std::size_t r) {
      return std::make_unique<gradsync::AnySynchronizer>(group.rank(int(r)), layout,
                                                        gradsync::PolicyNames{.codec = codec},
                                                        gradsync::Options{.check_finite = false});
    }));
  }
}

TEST_CASE("Mixed precision: checkpoint + resume is bit-identical (fp32 masters, loss scaler state)", "[trainer][mixed]") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string whole = (dir / "gradsync_mixed_whole.ckpt").string(), part = (dir / "gradsync_mixed_part.ckpt").string();
  TrainConfig c = test::small_resnet_config();
  c.precision = "mixed";
  c.epochs = 1;
  c.evaluate = false;
  // Oversized and quick to grow: the run both skips steps and changes its scale, so a resume that
  // restarted the scaler would scale differently from the first resumed iteration on.
  c.loss_scaling = {.initial_scale = 0x1p24f, .growth_interval = 3, .max_scale = 0x1p24f};
  c.checkpoint = whole;
  const TrainResult uninterrupted = train(c);
  REQUIRE(uninterrupted.skipped_steps > 0);

  const TrainResult resumed = test::stop_and_resume(c, part, 5, [](const TrainConfig& t) { return train(t); });
  CHECK(resumed.weights == uninterrupted.weights);
  CHECK(resumed.loss_scale == uninterrupted.loss_scale);
  CHECK(resumed.skipped_steps == uninterrupted.skipped_steps);

  TrainConfig fp32 = c;
  fp32.precision = "fp32";
  CHECK_THROWS_WITH(train(fp32), Catch::Contains("precision") && Catch::Contains("same configuration"));
  std::filesystem::remove(whole);
  std::filesystem::remove(part);
}

TEST_CASE("Mixed precision trains like fp32 - an oversized loss scale only skips steps", "[trainer][mixed]") {
  // Means over 4 seeds: one run of this small model moves by up to 12 points between seeds, and
  // between machines with the kernels oneDNN picks (AVX-512 or AVX2 accumulate in another order).
  TrainConfig c = test::small_resnet_config();
  double fp32_mean = 0, mixed_mean = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    c.seed = seed;
    c.precision = "fp32";
    const TrainResult fp32 = train(c);
    c.precision = "mixed";
    const TrainResult mixed = train(c);
    CHECK(mixed.weights != fp32.weights);  // the fp16 rounding did happen
    fp32_mean += fp32.test_accuracy / 4;
    mixed_mean += mixed.test_accuracy / 4;
  }
  INFO("mean fp32 accuracy " << fp32_mean << ", mixed " << mixed_mean);
  CHECK(fp32_mean > 0.5);  // 4 classes: it learned something
  CHECK(mixed_mean > fp32_mean - 0.08);
  c.seed = TrainConfig{}.seed;

  c.epochs = 1;
  c.loss_scaling = {.initial_scale = 0x1p24f, .growth_interval = 1000, .max_scale = 0x1p24f};
  const TrainResult big = train(c);  // the first loss gradients overflow fp16
  CHECK(big.skipped_steps > 0);
  CHECK(big.loss_scale < 0x1p24f);
  CHECK(big.skipped_steps < big.iterations);
  c.precision = "fp16";
  CHECK_THROWS_WITH(train(c), Catch::Contains("unknown precision 'fp16' (valid: fp32, mixed)"));
}
