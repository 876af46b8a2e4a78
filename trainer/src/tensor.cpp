#include "gradsync/trainer/tensor.hpp"
#include <gradsync/core/error.hpp>

#include <algorithm>
#include <new>
#include <unordered_map>
#include <vector>

#include "gradsync/trainer/kernels.hpp"

namespace gradsync::trainer {

namespace detail {
namespace {
constexpr std::size_t pool_min_bytes = std::size_t(1) << 16;   // smaller blocks: malloc's own bins do well
constexpr std::size_t pool_max_bytes = std::size_t(1) << 29;   // per thread; beyond it blocks go back
constexpr std::align_val_t pool_align{64};                     // a cache line: aligned vector loads

// Free blocks by exact byte count; a block freed on another thread joins that thread's pool.
thread_local bool pool_gone = false;  // trivially destructible: still readable after ~Pool
struct Pool {
  std::unordered_map<std::size_t, std::vector<void*>> free;
  std::size_t bytes = 0;
  ~Pool() {
    pool_gone = true;  // tensors destroyed later on this thread (statics) are freed directly
    for (auto& [n, blocks] : free)
      for (void* p : blocks) ::operator delete(p, pool_align);
  }
};
thread_local Pool pool;
}  // namespace

void* pool_allocate(std::size_t bytes) {
  if (bytes >= pool_min_bytes && !pool_gone) {
    auto it = pool.free.find(bytes);
    if (it != pool.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      pool.bytes -= bytes;
      return p;
    }
  }
  return ::operator new(bytes, pool_align);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (bytes >= pool_min_bytes && !pool_gone && pool.bytes + bytes <= pool_max_bytes) {
    try {
      pool.free[bytes].push_back(p);
      pool.bytes += bytes;
      return;
    } catch (const std::bad_alloc&) {  // no room to remember it: release it instead
    }
  }
  ::operator delete(p, pool_align);
}
}  // namespace detail

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
    throw UsageError("reshape " + to_string(shape_) + " to " + to_string(shape) + ": sizes differ");
  shape_ = std::move(shape);
  return std::move(*this);
}

void Tensor::resize(const Shape& shape) {
  shape_ = shape;
  data_.resize(product(shape));
}

void Tensor::fill(float v) { backend::for_each(size(), kernels::Fill{data(), v}); }

std::vector<float> Tensor::to_host() const { return trainer::to_host(data_); }

void Tensor::from_host(std::span<const float> values) {
  if (values.size() != size())
    throw UsageError("tensor " + to_string(shape_) + ": " + std::to_string(values.size()) +
                                " values from the host");
#if defined(GRADSYNC_TRAINER_CUDA)
  data_.from_host(values);
#else
  std::copy(values.begin(), values.end(), data_.begin());
#endif
}

void expect_shape(bool ok, const char* what, const char* expected, const Shape& got) {
  if (!ok) throw UsageError(std::string(what) + ": expected " + expected + ", got " + to_string(got));
}

}  // namespace gradsync::trainer
