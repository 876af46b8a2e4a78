#pragma once
// Tensor: a float array with a shape (NCHW for images, [N, T, F] for sequences) in host memory.
// Value semantics (copying copies the data); kernels take raw pointers so that a device backend
// can hand them device pointers instead.
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradsync::trainer {

using Shape = std::vector<std::size_t>;

namespace detail {
/// Float blocks reused per thread by exact size (tensor.cpp). A training step asks for the same
/// sizes every iteration; fresh multi-megabyte blocks would come from mmap and cost a page fault
/// and a kernel zero-fill per 4 KiB page each time (about a sixth of ResNet-20's step).
float* pool_allocate(std::size_t n);
void pool_deallocate(float* p, std::size_t n) noexcept;
}  // namespace detail

/// Tensor storage: pooled floats (detail::pool_allocate), left uninitialised because layers
/// overwrite their outputs completely and zero-filling every activation would be wasted traffic.
struct TensorAllocator {
  using value_type = float;
  template <class U>
  struct rebind { using other = TensorAllocator; };  // only ever float
  TensorAllocator() = default;
  float* allocate(std::size_t n) { return detail::pool_allocate(n); }
  void deallocate(float* p, std::size_t n) noexcept { detail::pool_deallocate(p, n); }
  template <class U>
  void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A>
  void construct(U* p, A&&... a) { ::new (static_cast<void*>(p)) U(std::forward<A>(a)...); }
  friend bool operator==(TensorAllocator, TensorAllocator) { return true; }
};

std::string to_string(const Shape& s);
std::size_t product(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  /// Uninitialised contents (see TensorAllocator).
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(product(shape_)) {}
  Tensor(Shape shape, float fill) : shape_(std::move(shape)), data_(product(shape_), fill) {}

  const Shape& shape() const { return shape_; }
  std::size_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t rank() const { return shape_.size(); }
  std::size_t size() const { return data_.size(); }
  bool empty() const { return data_.empty(); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  float& operator[](std::size_t i) { return data_[i]; }
  float operator[](std::size_t i) const { return data_[i]; }

  /// Same data, new shape of equal size.
  Tensor reshaped(Shape shape) const&;
  Tensor reshaped(Shape shape) &&;
  /// Resizes to `shape` (contents unspecified when the size changes); keeps the allocation when it can.
  void resize(const Shape& shape);
  void fill(float v);

 private:
  Shape shape_;
  std::vector<float, TensorAllocator> data_;
};

/// Throws std::invalid_argument "<what>: expected <expected>, got <shape>" when the check fails.
void expect_shape(bool ok, const char* what, const char* expected, const Shape& got);

}  // namespace gradsync::trainer
