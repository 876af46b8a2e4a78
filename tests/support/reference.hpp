#pragma once
// Test support: a short training loop over the uneven layout and the reference it must match.
// Catch2 assertions only: call require_reference on the thread that owns the test case.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "ranks.hpp"

namespace testing {

inline constexpr int kIterations = 3;
using Aggregates = std::vector<std::vector<std::vector<float>>>;  // [iteration][layer][element]

/// kIterations iterations of backward passes (layers handed over in reverse) with grad_value
/// gradients, overlapping each wait_for with the next iteration as a trainer does; returns the
/// aggregates this rank saw.
template <class Sync>
Aggregates train_with(Sync& sync, int rank) {
  const gradsync::ModelLayout& layout = sync.layout();
  std::vector<std::vector<float>> grads(layout.num_layers());
  Aggregates out;
  for (int it = 0; it < kIterations; ++it) {
    if (it > 0) {
      out.emplace_back();
      for (std::size_t l = 0; l < grads.size(); ++l) {
        sync.wait_for(l);
        out.back().push_back(grads[l]);
      }
    }
    for (std::size_t l = grads.size(); l-- > 0;) {  // backward order
      grads[l].resize(layout.layer(l).elements);
      for (std::size_t i = 0; i < grads[l].size(); ++i) grads[l][i] = grad_value(rank, l, it, i);
      sync.gradient_ready(l, grads[l]);
    }
    sync.finish_iteration();
  }
  sync.wait_all();
  out.push_back(grads);
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
