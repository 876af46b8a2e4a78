#pragma once
/// DispatchQueue: hands decided units from the communication thread to the executor threads, in
/// order. A fixed ring buffer under a mutex: it sees one push per unit, and executors sleep on it,
/// so a lock is cheaper and simpler than spinning.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "../core/error.hpp"

namespace gradsync::schedule {

/// A unit decided for execution in a given iteration.
struct Decision {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  float loss_ratio = 1.0f;  ///< rank 0's loss_t / loss_0 when it decided (DGT's share of important blocks)
};
static_assert(sizeof(Decision) == 16);  // it goes on the wire

class DispatchQueue {
 public:
  explicit DispatchQueue(std::size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

  void push(Decision d) {
    {
      std::lock_guard lock(mutex_);
      if (count_ == ring_.size()) throw UsageError("gradsync: dispatch queue overflow (a unit was decided twice)");
      ring_[(head_ + count_) % ring_.size()] = d;
      ++count_;
    }
    cv_.notify_one();
  }
  /// The next decision, or nothing once closed. `sequence`, if given, receives how many decisions
  /// were popped before this one: the same on every rank, as every rank pops rank 0's order.
  std::optional<Decision> pop(std::uint64_t* sequence = nullptr) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return count_ > 0 || closed_; });
    if (count_ == 0) return std::nullopt;
    const Decision d = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    if (sequence) *sequence = popped_;
    ++popped_;
    return d;
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Decision> ring_;
  std::size_t head_ = 0, count_ = 0;
  std::uint64_t popped_ = 0;
  bool closed_ = false;
};

}  // namespace gradsync::schedule
