#pragma once
// Test support: how far a codec may move the mean of the test gradients (grad_value over
// uneven_layout(), inputs in [-1, 1]) through any collective, and the worst error measured
// against that bound.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "ranks.hpp"

namespace testing {

/// Largest error of the mean, per element, that `codec` may make on `ranks` ranks, given
/// sum_abs = sum over ranks of |x_r|. An aggregation encodes at most ranks + 1 times (ring: every
/// partial sum and the result; PS: the push and the broadcast), each on values no larger than
/// sum_abs.
inline double codec_bound(std::string_view codec, int ranks, double sum_abs) {
  const double encodes = ranks + 1;
  if (codec == "fp32") return 1e-6 * sum_abs / ranks + 1e-30;
  if (codec == "fp16") return encodes * std::ldexp(1.0, -11) * sum_abs / ranks + 1e-7;
  if (codec == "bf16") return encodes * std::ldexp(1.0, -8) * sum_abs / ranks + 1e-30;
  // QSGD, max-norm: each encode moves a value by at most one level, scale / s, where the scale
  // (the bucket's largest magnitude) is at most `ranks` for partial sums of inputs in [-1, 1].
  const double s = codec == "qsgd4" ? 7 : codec == "qsgd8" ? 127 : 32767;
  return encodes * ranks / s / ranks;
}

/// The largest |got - mean| / codec_bound over every element of one iteration's aggregates
/// ([layer][element]); above 1 breaks the bound, 0 means no error at all.
inline double worst_error_ratio(const std::vector<std::vector<float>>& got, std::string_view codec, int ranks,
                                int iteration) {
  const gradsync::ModelLayout layout = uneven_layout();
  double worst = 0;
  for (std::size_t l = 0; l < layout.num_layers(); ++l)
    for (std::size_t i = 0; i < layout.layer(l).elements; ++i) {
      double sum = 0, sum_abs = 0;
      for (int r = 0; r < ranks; ++r) {
        sum += grad_value(r, l, iteration, i);
        sum_abs += std::abs(grad_value(r, l, iteration, i));
      }
      worst = std::max(worst, std::abs(got[l][i] - sum / ranks) / codec_bound(codec, ranks, sum_abs));
    }
  return worst;
}

}  // namespace testing
