#pragma once
/// Leader: rank 0's ordering protocol and its credit window. On rank 0 the communication thread
/// takes the most urgent ready unit from the priority lanes whenever the window has room, and tells
/// every rank to run it next; on the other ranks it receives those decisions. All ranks hand the
/// decisions to their executors in the same order, so collectives that need every rank at once
/// (ring) cannot deadlock however differently the ranks' backward passes are timed, and a more
/// urgent unit overtakes everything still queued at the next unit boundary (P3).
///
/// \code
///   schedule::Leader leader(transport, control, options, lane_capacities, table, dispatch);
///   std::thread comm([&] { leader.run(); });     // lead (rank 0) or follow (the others)
///   leader.ready(u, key);                        // unit u became ready on this rank
///   leader.finished(u);                          // its collective is done: frees its credit
///   leader.stop(); comm.join();                  // after Control::stop()
/// \endcode
///
/// The window (Options::credit_bytes, Options::inflight_units) bounds what is on the wire at once
/// so a late, urgent unit waits for little; a unit larger than the credit still goes, alone.
#include <atomic>
#include <chrono>
#include <span>
#include <vector>

#include "../core/options.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"
#include "dispatch_queue.hpp"
#include "lanes.hpp"
#include "units.hpp"

namespace gradsync::schedule {

/// The credit window: units and fp32 bytes in flight, bounded. Used by one chooser thread.
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
         const UnitTable& table, DispatchQueue& dispatch)
      : t_(t), control_(control), table_(table), dispatch_(dispatch), lanes_(lanes),
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
  /// The communication thread's body, until the control stops.
  void run() { leads() ? lead() : follow(); }
  /// Wakes the communication thread after Control::stop().
  void stop() { lanes_.wake(); }

 private:
  bool leads() const { return t_.rank() == 0; }
  std::size_t bytes(std::uint32_t u) const { return table_.unit(u).elements * sizeof(float); }

  void lead() {
    while (window_.wait_for_room()) {
      const std::uint64_t seen = lanes_.pushes();
      const auto u = lanes_.try_pop();
      if (!u) {
        if (!control_.stopping()) lanes_.wait_for_push(seen);
        continue;
      }
      if (!window_.take(bytes(*u))) return;
      const Decision d{table_.ready_iteration(*u), *u, loss_ratio_.load()};
      for (int r = 1; r < t_.size(); ++r) t_.send(r, transport::schedule_tag, std::as_bytes(std::span(&d, 1)));
      dispatch_.push(d);
    }
  }

  void follow() {
    while (!control_.stopping()) {
      Decision d;
      const auto got = t_.recv_for(0, transport::schedule_tag, std::as_writable_bytes(std::span(&d, 1)),
                                   std::chrono::milliseconds(50));
      if (!got) continue;
      if (*got != sizeof d || d.unit >= table_.size())
        throw PeerError("gradsync: " + t_.describe() + " got a malformed schedule message from rank 0");
      dispatch_.push(d);
    }
  }

  transport::Transport& t_;
  Control& control_;
  const UnitTable& table_;
  DispatchQueue& dispatch_;
  PriorityLanes lanes_;
  CreditWindow window_;
  std::atomic<float> loss_ratio_{1.0f};
};

}  // namespace gradsync::schedule
