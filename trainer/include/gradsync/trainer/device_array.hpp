#pragma once
// DeviceArray<T>: the device backend's storage - n uninitialised T's in stream-ordered device
// memory with value semantics (copies copy on the device). The host never dereferences it:
// to_host / from_host make the copies explicit.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "gradsync/trainer/backend.hpp"

namespace gradsync::trainer {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n), p_(static_cast<T*>(cuda::allocate(n * sizeof(T)))) {}
  DeviceArray(std::size_t n, T fill) : DeviceArray(n) {
    const std::vector<T> h(n, fill);
    from_host(h);
  }
  DeviceArray(const DeviceArray& o) : DeviceArray(o.n_) { cuda::copy(p_, o.p_, n_ * sizeof(T)); }
  DeviceArray(DeviceArray&& o) noexcept : n_(std::exchange(o.n_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  DeviceArray& operator=(DeviceArray o) noexcept {
    std::swap(n_, o.n_);
    std::swap(p_, o.p_);
    return *this;
  }
  ~DeviceArray() { cuda::release(p_); }

  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  /// Contents unspecified when the size changes.
  void resize(std::size_t n) {
    if (n != n_) *this = DeviceArray(n);
  }

  /// Blocking copies between the device and the host.
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    cuda::copy(h.data(), p_, n_ * sizeof(T));
    cuda::synchronize();
    return h;
  }
  void from_host(std::span<const T> h) {
    resize(h.size());
    cuda::copy(p_, h.data(), n_ * sizeof(T));
    cuda::synchronize();
  }

 private:
  std::size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace gradsync::trainer
