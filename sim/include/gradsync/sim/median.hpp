#pragma once
/// median(): the middle of a sample (the mean of the two middle values for an even count): profiles
/// and the simulator's rank skew are medians of measured times.
#include <algorithm>
#include <stdexcept>
#include <vector>

namespace gradsync::sim {

/// Throws std::invalid_argument for an empty sample.
inline double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("gradsync: the median of an empty sample");
  const auto mid = v.begin() + std::ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return (*std::max_element(v.begin(), mid) + *mid) / 2;
}

}  // namespace gradsync::sim
