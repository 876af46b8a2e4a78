#pragma once
// Test helper: DGT's best-effort channels in memory for the ranks of one test, losing the
// datagrams a rule picks (transport::BestEffort, what collective::DifferentialPs's
// best_effort_channel makes). Losing every datagram makes a DGT run deterministic: what arrives
// then follows the classification alone.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/transport/datagram.hpp>

namespace testing {

class MemoryChannels {
 public:
  /// drop(src, dst, n): whether the n-th datagram from src to dst is lost.
  MemoryChannels(int ranks, std::function<bool(int, int, int)> drop)
      : inbox_(ranks), sent_(ranks), drop_(std::move(drop)) {}
  std::unique_ptr<gradsync::transport::BestEffort> channel(int rank) { return std::make_unique<Channel>(*this, rank); }

 private:
  struct Channel final : gradsync::transport::BestEffort {
    Channel(MemoryChannels& m, int rank) : m(m), rank(rank) {}
    void send(int dst, std::span<const std::byte> data) override {
      std::lock_guard lock(m.mutex_);
      if (m.drop_(rank, dst, m.sent_[rank]++)) return;
      m.inbox_[dst].push_back({rank, std::vector<std::byte>(data.begin(), data.end())});
    }
    std::optional<Received> try_recv(std::span<std::byte> out) override {
      std::lock_guard lock(m.mutex_);
      if (m.inbox_[rank].empty()) return std::nullopt;
      auto [src, bytes] = std::move(m.inbox_[rank].front());
      m.inbox_[rank].pop_front();
      std::memcpy(out.data(), bytes.data(), std::min(bytes.size(), out.size()));
      return Received{src, bytes.size()};
    }
    std::string describe() const override { return "memory channel " + std::to_string(rank); }
    MemoryChannels& m;
    int rank;
  };
  std::mutex mutex_;
  std::vector<std::deque<std::pair<int, std::vector<std::byte>>>> inbox_;
  std::vector<int> sent_;
  std::function<bool(int, int, int)> drop_;
};

}  // namespace testing
