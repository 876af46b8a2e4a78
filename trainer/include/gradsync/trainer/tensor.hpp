#pragma once
// Tensor: a float array with a shape (NCHW for images, [N, T, F] for sequences) in backend memory:
// host memory, or device memory in the CUDA build (GRADSYNC_TRAINER_CUDA). Value semantics
// (copying copies the data); kernels take raw pointers. Host code reaches the values through
// to_host / from_host, which copy on the device build and cost a copy on the host build; the
// element accessors (operator[], span) exist on the host build only.
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(GRADSYNC_TRAINER_CUDA)
#include "gradsync/trainer/device_array.hpp"
#endif

namespace gradsync::trainer {

using Shape = std::vector<std::size_t>;

namespace detail {
/// Host blocks reused per thread by exact size (tensor.cpp). A training step asks for the same
/// sizes every iteration; fresh multi-megabyte blocks would come from mmap and cost a page fault
/// and a kernel zero-fill per 4 KiB page each time (about a sixth of ResNet-20's step).
void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;
}  // namespace detail

/// Host storage: pooled (detail::pool_allocate), left uninitialised because layers overwrite
/// their outputs completely and zero-filling every activation would be wasted traffic.
template <class T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <class U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(detail::pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { detail::pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A>
  void construct(U* p, A&&... a) { ::new (static_cast<void*>(p)) U(std::forward<A>(a)...); }
  template <class U>
  friend bool operator==(HostAllocator, HostAllocator<U>) { return true; }
};

/// Backend memory for n T's (kernel buffers: tensors, pooling indices, labels).
#if defined(GRADSYNC_TRAINER_CUDA)
template <class T>
using Buffer = DeviceArray<T>;
#else
template <class T>
using Buffer = std::vector<T, HostAllocator<T>>;
#endif

std::string to_string(const Shape& s);
std::size_t product(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  /// Uninitialised contents (see HostAllocator).
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(product(shape_)) {}
  Tensor(Shape shape, float fill) : shape_(std::move(shape)), data_(product(shape_), fill) {}

  const Shape& shape() const { return shape_; }
  std::size_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t rank() const { return shape_.size(); }
  std::size_t size() const { return data_.size(); }
  bool empty() const { return data_.empty(); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
#if !defined(GRADSYNC_TRAINER_CUDA)
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  float& operator[](std::size_t i) { return data_[i]; }
  float operator[](std::size_t i) const { return data_[i]; }
#endif
  /// The values in host memory, on either backend.
  std::vector<float> to_host() const;
  /// Overwrites the values from host memory (same size).
  void from_host(std::span<const float> values);

  /// Same data, new shape of equal size.
  Tensor reshaped(Shape shape) const&;
  Tensor reshaped(Shape shape) &&;
  /// Resizes to `shape` (contents unspecified when the size changes); keeps the allocation when it can.
  void resize(const Shape& shape);
  void fill(float v);

 private:
  Shape shape_;
  Buffer<float> data_;
};

/// A buffer's values in host memory, and back (copies on either backend).
template <class T>
std::vector<T> to_host(const Buffer<T>& b) {
#if defined(GRADSYNC_TRAINER_CUDA)
  return b.to_host();
#else
  return {b.begin(), b.end()};
#endif
}
template <class T>
void from_host(Buffer<T>& b, std::span<const T> values) {
#if defined(GRADSYNC_TRAINER_CUDA)
  b.from_host(values);
#else
  b.assign(values.begin(), values.end());
#endif
}

/// Throws gradsync::UsageError "<what>: expected <expected>, got <shape>" when the check fails.
void expect_shape(bool ok, const char* what, const char* expected, const Shape& got);

}  // namespace gradsync::trainer
