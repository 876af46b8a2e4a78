#pragma once
// Test support: a short training loop over the uneven layout and the reference it must match.
// Catch2 assertions only: call require_reference on the thread that owns the test case.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <gradsync/any_synchronizer.hpp>

#include "ranks.hpp"

namespace testing {

inline constexpr int kIterations = 3;
using Aggregates = std::vector<std::vector<std::vector<float>>>;  // [iteration][layer][element]

/// A gradient in host memory, for train_with (support/guarded_device.hpp has one in "device" memory).
class HostGradient {
 public:
  explicit HostGradient(std::size_t n) : v_(n) {}
  std::span<float> span() { return v_; }
  void upload(std::span<const float> values) { std::ranges::copy(values, v_.begin()); }
  std::vector<float> download() const { return v_; }

 private:
  std::vector<float> v_;
};

/// kIterations iterations of backward passes (layers handed over in reverse) with grad_value
/// gradients in `Gradient` memory, overlapping each wait_for with the next iteration as a trainer
/// does; returns the aggregates this rank saw.
template <class Gradient = HostGradient, class Sync>
Aggregates train_with(Sync& sync, int rank) {
  const gradsync::ModelLayout& layout = sync.layout();
  std::vector<std::unique_ptr<Gradient>> grads;
  for (std::size_t l = 0; l < layout.num_layers(); ++l) grads.push_back(std::make_unique<Gradient>(layout.layer(l).elements));
  auto aggregates = [&] {
    std::vector<std::vector<float>> a;
    for (const auto& g : grads) a.push_back(g->download());
    return a;
  };
  Aggregates out;
  std::vector<float> values;
  for (int it = 0; it < kIterations; ++it) {
    if (it > 0) {
      for (std::size_t l = 0; l < grads.size(); ++l) sync.wait_for(l);
      out.push_back(aggregates());
    }
    for (std::size_t l = grads.size(); l-- > 0;) {  // backward order
      values.resize(layout.layer(l).elements);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = grad_value(rank, l, it, i);
      grads[l]->upload(values);
      sync.gradient_ready(l, grads[l]->span());
    }
    sync.finish_iteration();
  }
  sync.wait_all();
  out.push_back(aggregates());
  return out;
}

/// train_with an AnySynchronizer over uneven_layout().
inline Aggregates train(int rank, gradsync::transport::Transport& t, const gradsync::PolicyNames& names, bool average,
                        gradsync::Options options = {}) {
  options.average = average;
  gradsync::AnySynchronizer sync(t, uneven_layout(), names, std::move(options));
  return train_with(sync, rank);
}

/// Checks `got` against the mean (or sum) of every rank's grad_value in double precision, within
/// `tolerance` times the mean (or sum) of the magnitudes.
inline void require_reference(const Aggregates& got, int ranks, bool average, double tolerance = 1e-6) {
  const gradsync::ModelLayout layout = uneven_layout();
  REQUIRE(got.size() == static_cast<std::size_t>(kIterations));
  for (int it = 0; it < kIterations; ++it)
    for (std::size_t l = 0; l < layout.num_layers(); ++l)
      for (std::size_t i = 0; i < layout.layer(l).elements; ++i) {
        double sum = 0, magnitude = 0;
        for (int r = 0; r < ranks; ++r) {
          sum += grad_value(r, l, it, i);
          magnitude += std::abs(grad_value(r, l, it, i));
        }
        const double expect = average ? sum / ranks : sum;
        const double scale = (average ? magnitude / ranks : magnitude) + 1e-30;
        if (std::abs(got[it][l][i] - expect) > tolerance * scale) {
          FAIL_CHECK("iteration " << it << " layer " << l << " element " << i << ": got " << got[it][l][i]
                                  << ", reference " << expect);
          return;
        }
      }
}

inline bool bit_identical(const Aggregates& a, const Aggregates& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t it = 0; it < a.size(); ++it)
    for (std::size_t l = 0; l < a[it].size(); ++l)
      if (a[it][l].size() != b[it][l].size() ||
          std::memcmp(a[it][l].data(), b[it][l].data(), a[it][l].size() * sizeof(float)) != 0)
        return false;
  return true;
}

}  // namespace testing
