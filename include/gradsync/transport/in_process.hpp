#pragma once
/// InProcess: N ranks as threads of one process. The embedded default and the test workhorse.
///
/// \code
///   gradsync::transport::InProcessGroup group(4);
///   std::vector<std::jthread> ranks;
///   for (int r = 0; r < 4; ++r)
///     ranks.emplace_back([&, r] { train(group.rank(r)); });  // group.rank(r) is a Transport&
/// \endcode
///
/// A send copies into a pooled buffer and returns at once; buffers are recycled, so steady-state
/// traffic does not allocate.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "transport.hpp"

namespace gradsync::transport {

class InProcessGroup {
 public:
  explicit InProcessGroup(int size, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : timeout_(timeout) {
    if (size < 1) throw UsageError("gradsync: InProcessGroup needs at least one rank");
    pool_.reserve(256);  // room for many messages in flight: steady state never regrows it
    for (int r = 0; r < size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
  }
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }
  Transport& rank(int r) {
    if (r < 0 || r >= size())
      throw UsageError("gradsync: InProcessGroup has ranks 0.." + std::to_string(size() - 1) +
                       ", asked for rank " + std::to_string(r));
    return *endpoints_[r];
  }

 private:
  struct Message {
    int src;
    Tag tag;
    std::vector<std::byte> bytes;
  };

  class Endpoint final : public Transport {
   public:
    Endpoint(InProcessGroup& g, int rank) : group_(g), rank_(rank) { inbox_.reserve(64); }
    int rank() const override { return rank_; }
    int size() const override { return group_.size(); }
    std::chrono::milliseconds timeout() const override { return group_.timeout_; }
    std::string describe() const override {
      return "in-process rank " + std::to_string(rank_) + " of " + std::to_string(size());
    }

    void send(int dst, Tag tag, std::span<const std::byte> data) override {
      check_peer(dst);
      std::vector<std::byte> bytes = group_.take_buffer(data.size());
      bytes.assign(data.begin(), data.end());
      Endpoint& to = *group_.endpoints_[dst];
      {
        std::lock_guard lock(to.mutex_);
        to.inbox_.push_back({rank_, tag, std::move(bytes)});
      }
      to.arrived_.notify_all();
    }

    std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                        std::chrono::milliseconds wait) override {
      check_peer(src);
      std::unique_lock lock(mutex_);
      auto match = [&] {
        return std::find_if(inbox_.begin(), inbox_.end(), [&](const Message& m) { return m.src == src && m.tag == tag; });
      };
      auto it = match();
      if (it == inbox_.end() &&
          !arrived_.wait_for(lock, wait, [&] { return (it = match()) != inbox_.end(); }))
        return std::nullopt;
      std::vector<std::byte> bytes = std::move(it->bytes);
      inbox_.erase(it);
      lock.unlock();
      const std::size_t n = bytes.size();
      const bool fits = n <= out.size();
      if (fits && n != 0) std::memcpy(out.data(), bytes.data(), n);  // empty spans may hold null
      group_.return_buffer(std::move(bytes));
      if (!fits)
        throw WireError("gradsync: " + describe() + " received " + std::to_string(n) + " bytes from rank " +
                        std::to_string(src) + " but expected at most " + std::to_string(out.size()) +
                        " (ranks disagree on layout, slicing or codec)");
      return n;
    }

   private:
    InProcessGroup& group_;
    int rank_;
    std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<Message> inbox_;  // FIFO per (src, tag): matched from the front
  };

  /// The smallest recycled buffer that can hold `bytes` without growing, if the pool has one
  /// (best fit: a small message taking a large buffer would leave the next large one to allocate).
  std::vector<std::byte> take_buffer(std::size_t bytes) {
    std::lock_guard lock(pool_mutex_);
    auto best = pool_.end();
    for (auto it = pool_.begin(); it != pool_.end(); ++it)
      if (it->capacity() >= bytes && (best == pool_.end() || it->capacity() < best->capacity())) best = it;
    if (best == pool_.end()) return {};
    std::vector<std::byte> b = std::move(*best);
    pool_.erase(best);
    return b;
  }
  void return_buffer(std::vector<std::byte> b) {
    std::lock_guard lock(pool_mutex_);
    pool_.push_back(std::move(b));
  }

  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::mutex pool_mutex_;
  std::vector<std::vector<std::byte>> pool_;
};

}  // namespace gradsync::transport
