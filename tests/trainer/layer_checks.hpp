#pragma once
// Test helper: checks shared by the host layer tests and their device twins (test_gpu_layers).
#include <algorithm>
#include <numeric>
#include <random>

#include "gradcheck.hpp"
#include "gradsync/trainer/layers.hpp"

namespace gradsync::trainer::test {

/// Parameters uniform in [-0.5, 0.5) (around 1 for those initialised to ones), seeded.
inline void init(Module& m, std::uint64_t seed = 3) {
  std::vector<Param*> ps;
  m.collect_params(ps);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (auto* p : ps) {
    std::vector<float> v(p->value.size());
    for (float& x : v) x = (p->init == Param::Init::ones ? 1.0f : 0.0f) + u(rng);
    p->value.from_host(v);
  }
}

/// Distinct values at least 0.05 apart, none near 0: no kinks (ReLU, max) within the FD step.
inline Tensor separated(Shape shape, std::uint64_t seed) {
  Tensor t(std::move(shape));
  std::vector<std::size_t> perm(t.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  std::vector<float> v(t.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (float(perm[i]) - float(v.size()) / 2.0f) * 0.05f + 0.025f;
  t.from_host(v);
  return t;
}

/// BatchNorm2d on [N, C, H, W] and on [N, C].
inline void check_batchnorm_gradients() {
  BatchNorm2d bn("bn", 3);
  init(bn);
  GradCheck{.eps = 1e-3}.run(bn, random_tensor({4, 3, 3, 2}, 13));
  BatchNorm2d bn1d("bn1d", 5);
  init(bn1d);
  GradCheck{.eps = 1e-3}.run(bn1d, random_tensor({6, 5}, 14));
}

/// LSTM alone, and fed image rows with only its last step read.
inline void check_lstm_gradients() {
  LSTM lstm("lstm", 3, 4);
  init(lstm);
  GradCheck{.eps = 1e-3, .samples = 30}.run(lstm, random_tensor({2, 5, 3}, 26));
  Sequential seq("seq");
  seq.emplace<RowsAsSequence>();
  seq.emplace<LSTM>("lstm2", 6, 3);
  seq.emplace<LastStep>();
  init(seq);
  GradCheck{.eps = 1e-3}.run(seq, random_tensor({2, 2, 4, 3}, 27));
}

}  // namespace gradsync::trainer::test
