#include "gradsync/trainer/tensor.hpp"

#include <algorithm>

#include "gradsync/trainer/kernels.hpp"

namespace gradsync::trainer {

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::size_t product(const Shape& s) {
  std::size_t p = 1;
  for (auto d : s) p *= d;
  return p;
}

Tensor Tensor::reshaped(Shape shape) const& {
  Tensor t = *this;
  return std::move(t).reshaped(std::move(shape));
}

Tensor Tensor::reshaped(Shape shape) && {
  if (product(shape) != data_.size())
    throw std::invalid_argument("reshape " + to_string(shape_) + " to " + to_string(shape) + ": sizes differ");
  shape_ = std::move(shape);
  return std::move(*this);
}

void Tensor::resize(const Shape& shape) {
  shape_ = shape;
  data_.resize(product(shape));
}

void Tensor::fill(float v) { backend::for_each(size(), kernels::Fill{data(), v}); }

std::vector<float> Tensor::to_host() const {
#if defined(GRADSYNC_TRAINER_CUDA)
  return data_.to_host();
#else
  return {data_.begin(), data_.end()};
#endif
}

void Tensor::from_host(std::span<const float> values) {
  if (values.size() != size())
    throw std::invalid_argument("tensor " + to_string(shape_) + ": " + std::to_string(values.size()) +
                                " values from the host");
#if defined(GRADSYNC_TRAINER_CUDA)
  data_.from_host(values);
#else
  std::copy(values.begin(), values.end(), data_.begin());
#endif
}

void expect_shape(bool ok, const char* what, const char* expected, const Shape& got) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": expected " + expected + ", got " + to_string(got));
}

}  // namespace gradsync::trainer
