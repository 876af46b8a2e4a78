#pragma once
/// Lanes: units queued by priority key, the lowest key first (strictly: FIFO among equal keys,
/// never `<=`, the bug in P3's released queue that broke ties unfairly). One Boost.Lockfree queue
/// per key plus a bitmap of lanes that may be non-empty, so the consumer finds the most urgent
/// unit by scanning words, not lanes. Producers never block; capacities are fixed at
/// construction, so pushes and pops never allocate. The sequencer (schedule/leader.hpp) queues the
/// units ready on every rank in one, the parameter server (collective/server.hpp) the units whose
/// pushes are all in.
///
/// \code
///   gradsync::priority::Lanes lanes({3, 1});   // lane 0 holds up to 3 units, lane 1 up to 1
///   lanes.push(0, 7);              // unit 7, key 0
///   auto u = lanes.try_pop();      // 7: the lowest non-empty key first, FIFO within a key
/// \endcode
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "../core/error.hpp"

namespace gradsync::priority {

class Lanes {
 public:
  /// capacity[k]: how many units lane k may hold at once (e.g. how many units have key k).
  explicit Lanes(const std::vector<std::size_t>& capacity)
      : lanes_(capacity.size()), bits_((capacity.size() + 63) / 64) {
    for (std::size_t k = 0; k < capacity.size(); ++k)
      lanes_[k] = std::make_unique<Lane>(capacity[k] == 0 ? 1 : capacity[k]);
    for (auto& w : bits_) w.store(0, std::memory_order_relaxed);
  }

  std::size_t levels() const { return lanes_.size(); }

  /// Queues `unit` in lane `key`. Thread-safe; never blocks, never allocates.
  void push(std::uint32_t key, std::uint32_t unit) {
    if (!lanes_[key]->bounded_push(unit))
      throw UsageError("gradsync: priority lane " + std::to_string(key) + " is full (a unit was queued twice)");
    bits_[key / 64].fetch_or(std::uint64_t{1} << (key % 64), std::memory_order_release);
    pushed_.fetch_add(1, std::memory_order_release);
    pushed_.notify_one();
  }

  /// The most urgent queued unit, if any. One consumer at a time.
  std::optional<std::uint32_t> try_pop() {
    for (std::size_t w = 0; w < bits_.size(); ++w) {
      std::uint64_t word = bits_[w].load(std::memory_order_acquire);
      while (word != 0) {
        const auto b = static_cast<unsigned>(std::countr_zero(word));
        const std::size_t key = w * 64 + b;
        std::uint32_t unit;
        if (lanes_[key]->pop(unit)) return unit;
        // Lane looked busy but is empty: clear its bit, then re-check so a concurrent push that
        // set the bit just before our clear is not lost.
        const std::uint64_t bit = std::uint64_t{1} << b;
        bits_[w].fetch_and(~bit, std::memory_order_acq_rel);
        if (!lanes_[key]->empty()) bits_[w].fetch_or(bit, std::memory_order_release);
        word &= ~bit;
      }
    }
    return std::nullopt;
  }

  /// A counter that grows with every push: wait on it (std::atomic::wait) when try_pop is empty.
  std::uint64_t pushes() const { return pushed_.load(std::memory_order_acquire); }
  void wait_for_push(std::uint64_t seen) const { pushed_.wait(seen, std::memory_order_acquire); }
  /// Wakes a consumer blocked in wait_for_push (used to stop it).
  void wake() {
    pushed_.fetch_add(1, std::memory_order_release);
    pushed_.notify_all();
  }

 private:
  using Lane = boost::lockfree::queue<std::uint32_t>;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::atomic<std::uint64_t>> bits_;
  std::atomic<std::uint64_t> pushed_{0};
};

}  // namespace gradsync::priority
