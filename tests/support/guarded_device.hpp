#pragma once
// Test support: the host twin of cuda::Device (cuda/on_device.cuh) for codec::OnDevice. Its
// "device memory" is host pages that are readable only while some thread is inside one of the
// space's steps: at every other moment they are mapped PROT_NONE, so anything else that reads or
// writes a unit there (the Synchronizer, a collective, an executor's fused copy) faults and the
// test crashes. Steps run the host codec, the same functors through thrust::host, and memcpy.
//
//   testing::DeviceBuffer grad(n);               // "device" memory
//   grad.upload(values);  grad.download();       // the test's own copies, as cudaMemcpy
//   gradsync::codec::OnDevice<gradsync::codec::Qsgd<8>, testing::GuardedDevice> codec;
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include <gradsync/codec/on_device.hpp>
#include <thrust/find.h>

namespace testing {

/// The registry of guarded regions and the count of threads inside a step.
class GuardedMemory {
 public:
  static GuardedMemory& instance() {
    static GuardedMemory m;
    return m;
  }
  std::span<std::byte> allocate(std::size_t bytes) {
    const std::size_t size = std::max<std::size_t>((bytes + page - 1) / page * page, page);
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    std::lock_guard lock(mutex_);
    regions_.push_back({static_cast<std::byte*>(p), size});
    if (open_ > 0) protect(regions_.back(), PROT_READ | PROT_WRITE);
    return {static_cast<std::byte*>(p), bytes};
  }
  void release(std::byte* p) {
    std::lock_guard lock(mutex_);
    const auto it = std::ranges::find(regions_, p, &Region::begin);
    if (it == regions_.end()) return;
    munmap(it->begin, it->size);
    regions_.erase(it);
  }
  bool holds(const void* p) const {
    std::lock_guard lock(mutex_);
    const auto* b = static_cast<const std::byte*>(p);
    return std::ranges::any_of(regions_, [&](const Region& r) { return b >= r.begin && b < r.begin + r.size; });
  }
  /// The pages are readable while an Open lives on any thread.
  class Open {
   public:
    Open() : m_(instance()) { m_.enter(); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;
    ~Open() { m_.leave(); }

   private:
    GuardedMemory& m_;
  };

 private:
  struct Region {
    std::byte* begin;
    std::size_t size;
  };
  static constexpr std::size_t page = 4096;
  static void protect(const Region& r, int prot) {
    if (mprotect(r.begin, r.size, prot) != 0) throw std::runtime_error("mprotect failed");
  }
  void enter() {
    std::lock_guard lock(mutex_);
    if (open_++ == 0)
      for (const Region& r : regions_) protect(r, PROT_READ | PROT_WRITE);
  }
  void leave() {
    std::lock_guard lock(mutex_);
    if (--open_ == 0)
      for (const Region& r : regions_) protect(r, PROT_NONE);
  }

  mutable std::mutex mutex_;
  std::vector<Region> regions_;
  int open_ = 0;
};

/// Floats in guarded memory: what a test hands over as a GPU gradient.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n)
      : bytes_(GuardedMemory::instance().allocate(n * sizeof(float))), n_(n) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { GuardedMemory::instance().release(bytes_.data()); }
  std::span<float> span() const { return {reinterpret_cast<float*>(bytes_.data()), n_}; }
  void upload(std::span<const float> values) {
    GuardedMemory::Open open;
    std::memcpy(bytes_.data(), values.data(), std::min(values.size(), n_) * sizeof(float));
  }
  std::vector<float> download() const {
    GuardedMemory::Open open;
    const std::span<const float> s = span();
    return {s.begin(), s.end()};
  }

 private:
  std::span<std::byte> bytes_;
  std::size_t n_;
};

/// The Space (codec/on_device.hpp): host codec and thrust::host on guarded memory. It also checks
/// that every step is given device memory where the device's would be (the CUDA space could not
/// read host memory in a kernel).
struct GuardedDevice {
  bool holds(const void* p) const { return p && GuardedMemory::instance().holds(p); }
  std::span<std::byte> scratch(std::size_t bytes) const {
    thread_local std::vector<std::unique_ptr<DeviceBuffer>> mine;  // freed when the thread ends
    if (mine.empty() || mine.back()->span().size_bytes() < bytes)
      mine.push_back(std::make_unique<DeviceBuffer>((bytes + sizeof(float) - 1) / sizeof(float)));
    return std::as_writable_bytes(mine.back()->span()).first(bytes);
  }
  void to_host(std::span<std::byte> host, std::span<const std::byte> device) const {
    expect(!holds(host.data()) && holds(device.data()), "to_host");
    GuardedMemory::Open open;
    std::memcpy(host.data(), device.data(), host.size());
  }
  void to_device(std::span<std::byte> device, std::span<const std::byte> host) const {
    expect(holds(device.data()) && !holds(host.data()), "to_device");
    GuardedMemory::Open open;
    std::memcpy(device.data(), host.data(), host.size());
  }
  template <class C>
  std::size_t encode(const C& c, std::span<const float> in, std::span<std::byte> out,
                     const gradsync::codec::EncodeContext& ctx) const {
    expect(holds(in.data()) && holds(out.data()), "encode");
    GuardedMemory::Open open;
    return c.encode(in, out, ctx);
  }
  template <class C>
  void decode(const C& c, std::span<const std::byte> wire, std::span<float> out, bool add) const {
    expect(holds(wire.data()) && holds(out.data()), "decode");
    GuardedMemory::Open open;
    if (add) c.decode_add(wire, out);
    else c.decode(wire, out);
  }
  template <class F>
  void for_each(std::size_t n, const F& f) const {
    GuardedMemory::Open open;
    gradsync::codec::detail::for_each_index(thrust::host, n, f);
  }
  template <class P>
  std::size_t find_if(std::size_t n, const P& p) const {
    GuardedMemory::Open open;
    const thrust::counting_iterator<std::size_t> first(0);
    return static_cast<std::size_t>(thrust::find_if(thrust::host, first, first + n, p) - first);
  }

 private:
  static void expect(bool ok, const char* step) {
    if (!ok) throw std::logic_error(std::string("GuardedDevice::") + step + ": host and device memory mixed up");
  }
};

template <class C>
using GuardedOnDevice = gradsync::codec::OnDevice<C, GuardedDevice>;

}  // namespace testing
