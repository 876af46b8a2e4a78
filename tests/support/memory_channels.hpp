#pragma once
// Test helper: DGT's best-effort channels in memory for the ranks of one test, losing the
// datagrams a rule picks (transport::BestEffort, what collective::ParameterServer's
// best_effort_channel makes), or holding every one back until its sender sends one of a later
// iteration: then each arrives after the deadline it was meant for and before the next. Losing
// every datagram, or holding every one back, makes a DGT run deterministic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
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

#include <gradsync/collective/differential.hpp>

namespace testing {

class MemoryChannels {
 public:
  /// drop(src, dst, n): whether the n-th datagram from src to dst is lost; `one_iteration_late`:
  /// the others arrive once their sender sends one of a later iteration.
  MemoryChannels(int ranks, std::function<bool(int, int, int)> drop, bool one_iteration_late = false)
      : inbox_(ranks), sent_(ranks), held_(ranks), drop_(std::move(drop)), late_(one_iteration_late) {}
  std::unique_ptr<gradsync::transport::BestEffort> channel(int rank) { return std::make_unique<Channel>(*this, rank); }

 private:
  struct Channel final : gradsync::transport::BestEffort {
    Channel(MemoryChannels& m, int rank) : m(m), rank(rank) {}
    void send(int dst, std::span<const std::byte> data) override {
      std::lock_guard lock(m.mutex_);
      if (m.drop_(rank, dst, m.sent_[rank]++)) return;
      if (!m.late_) return m.inbox_[dst].push_back({rank, std::vector<std::byte>(data.begin(), data.end())});
      gradsync::collective::detail::PieceHeader h;
      std::memcpy(&h, data.data(), sizeof h);
      auto& held = m.held_[rank];
      if (!held.empty() && held.front().iteration < h.iteration) {
        for (auto& d : held) m.inbox_[d.dst].push_back({rank, std::move(d.bytes)});
        held.clear();
      }
      held.push_back({h.iteration, dst, std::vector<std::byte>(data.begin(), data.end())});
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
  struct Held {
    std::int64_t iteration;
    int dst;
    std::vector<std::byte> bytes;
  };
  std::vector<std::vector<Held>> held_;  // per sender, when one_iteration_late
  std::function<bool(int, int, int)> drop_;
  bool late_;
};

}  // namespace testing
