#pragma once
/// Leader: rank 0's ordering protocol and its credit window. There is no thread of its own: an
/// executor that is free asks next() for its next unit. On rank 0 it waits for room in the window,
/// takes the most urgent ready unit from the priority lanes and tells every rank to run it next; on
/// the other ranks it receives that decision. One executor chooses at a time, so every rank runs
/// the decisions in the same order: collectives that need every rank at once (ring) cannot
/// deadlock however differently the ranks' backward passes are timed, and a more urgent unit
/// overtakes everything still queued at the next unit boundary (P3). Choosing on the executor
/// that will run the unit saves a thread hand-off (a wake-up) per unit on every rank.
///
/// \code
///   schedule::Leader leader(transport, control, options, lane_capacities, table);
///   leader.ready(u, key);                        // unit u became ready on this rank
///   std::uint64_t seq;
///   while (auto d = leader.next(seq)) run(*d);   // each executor thread; nothing once stopping
///   leader.finished(u);                          // its collective is done: frees its credit
///   leader.stop();                               // after Control::stop(): wakes a waiting chooser
/// \endcode
///
/// The window (Options::credit_bytes, Options::inflight_units) bounds what is on the wire at once
/// so a late, urgent unit waits for little; a unit larger than the credit still goes, alone.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "../core/options.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"
#include "lanes.hpp"
#include "units.hpp"

namespace gradsync::schedule {

/// A unit decided for execution in a given iteration.
struct Decision {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  float loss_ratio = 1.0f;  ///< rank 0's loss_t / loss_0 when it decided (DGT's share of important blocks)
};
static_assert(sizeof(Decision) == 16);  // it goes on the wire

/// The credit window: units and fp32 bytes in flight, bounded. Used by one chooser at a time.
class CreditWindow {
 public:
  CreditWindow(Control& control, std::size_t bytes, std::size_t units)
      : control_(control), credit_(bytes), units_(units) {}
  /// Waits until there is room for another unit (false once stopping): choose only then, so the
  /// choice is as late as possible.
  bool wait_for_room() {
    return control_.wait([&] { return inflight_units_ < units_ && inflight_bytes_ < credit_; });
  }
  /// Books `bytes` once they fit (or nothing else is in flight); false once stopping.
  bool take(std::size_t bytes) {
    if (!control_.wait([&] { return inflight_units_ == 0 || inflight_bytes_ + bytes <= credit_; })) return false;
    control_.update([&] {
      ++inflight_units_;
      inflight_bytes_ += bytes;
    });
    return true;
  }
  void give_back(std::size_t bytes) {
    control_.update([&] {
      --inflight_units_;
      inflight_bytes_ -= bytes;
    });
  }

 private:
  Control& control_;
  std::size_t credit_, units_;
  std::size_t inflight_units_ = 0, inflight_bytes_ = 0;  // guarded by the control's lock
};

class Leader {
 public:
  Leader(transport::Transport& t, Control& control, const Options& options, const std::vector<std::size_t>& lanes,
         const UnitTable& table)
      : t_(t), control_(control), table_(table), lanes_(lanes),
        window_(control, options.credit_bytes, options.inflight_units) {}

  /// Unit u is ready on this rank with priority `key` (the caller's thread; never blocks).
  void ready(std::uint32_t u, std::uint32_t key) {
    if (leads()) lanes_.push(key, u);
    else control_.notify();  // an executor may be waiting for it
  }
  /// Unit u's collective finished on this rank.
  void finished(std::uint32_t u) {
    if (leads()) window_.give_back(bytes(u));
  }
  /// Rank 0's latest loss_t / loss_0, sent with every decision from now on (DGT).
  void loss_ratio(float ratio) { loss_ratio_.store(ratio); }
  /// The next unit to run, in rank 0's order, for the calling executor; nothing once stopping.
  /// `sequence` receives the decision's index, the same on every rank.
  std::optional<Decision> next(std::uint64_t& sequence) {
    std::lock_guard lock(choosing_);
    const auto d = leads() ? decide() : receive();
    if (d) sequence = decided_++;
    return d;
  }
  /// Wakes a chooser waiting for a ready unit after Control::stop().
  void stop() { lanes_.wake(); }

 private:
  bool leads() const { return t_.rank() == 0; }
  std::size_t bytes(std::uint32_t u) const { return table_.unit(u).elements * sizeof(float); }

  // Rank 0: as late as possible, once the window has room, the most urgent ready unit.
  std::optional<Decision> decide() {
    while (window_.wait_for_room()) {
      const std::uint64_t seen = lanes_.pushes();
      const auto u = lanes_.try_pop();
      if (!u) {
        if (!control_.stopping()) lanes_.wait_for_push(seen);
        continue;
      }
      if (!window_.take(bytes(*u))) return std::nullopt;
      const Decision d{table_.ready_iteration(*u), *u, loss_ratio_.load()};
      for (int r = 1; r < t_.size(); ++r) t_.send(r, transport::schedule_tag, std::as_bytes(std::span(&d, 1)));
      return d;
    }
    return std::nullopt;
  }

  // The other ranks: rank 0's next decision.
  std::optional<Decision> receive() {
    while (!control_.stopping()) {
      Decision d;
      const auto got = t_.recv_for(0, transport::schedule_tag, std::as_writable_bytes(std::span(&d, 1)),
                                   std::chrono::milliseconds(50));
      if (!got) continue;
      if (*got != sizeof d || d.unit >= table_.size())
        throw PeerError("gradsync: " + t_.describe() + " got a malformed schedule message from rank 0");
      return d;
    }
    return std::nullopt;
  }

  transport::Transport& t_;
  Control& control_;
  const UnitTable& table_;
  PriorityLanes lanes_;
  CreditWindow window_;
  std::atomic<float> loss_ratio_{1.0f};
  std::mutex choosing_;        // one executor chooses at a time: every rank runs rank 0's order
  std::uint64_t decided_ = 0;  // decisions taken so far (guarded by choosing_)
};

}  // namespace gradsync::schedule
