#pragma once
/// Leader: rank 0's ordering protocol and its credit window. There is no thread of its own: an
/// executor that is free asks next() for its next unit. On rank 0 it waits for room in the window,
/// takes the most urgent unit that is ready on every rank and tells every rank to run it next; on
/// the other ranks it receives that decision. One executor chooses at a time, so every rank runs
/// the decisions in the same order: collectives that need every rank at once (ring) cannot
/// deadlock however differently the ranks' backward passes are timed, and a more urgent unit
/// overtakes everything still queued at the next unit boundary (P3). Choosing on the executor
/// that will run the unit saves a thread hand-off (a wake-up) per unit on every rank.
///
/// Ready on every rank, not on rank 0 alone: the other ranks report each layer's newly ready units
/// to rank 0 (one small message per gradient_ready). A unit chosen because it is ready on rank 0
/// only makes every other rank's executor wait for its own backward pass while units ready
/// everywhere queue behind it, and the link idles meanwhile (Horovod's coordinator agrees on
/// readiness the same way).
///
/// \code
///   schedule::Leader leader(transport, control, options, lane_capacities, table);
///   leader.ready(iteration, key, [&](auto sink) { table.hand_over(layer, grad, iteration, sink); });
///   std::uint64_t seq;
///   while (auto d = leader.next(seq)) run(*d);   // each executor thread; nothing once stopping
///   control.update([&] { leader.finished(u); }); // its collective is done: frees its credit
///   leader.stop();                               // after Control::stop(): wakes a waiting chooser
/// \endcode
///
/// Idle: a chooser waits for messages (rank 0 for reports, the others for decisions) only while
/// one can come. No unit can be decided before it is ready on this rank, so while every unit
/// this rank handed over is decided, the chooser sleeps until gradient_ready hands over more,
/// instead of polling the transport every 20-200 us through a forward pass (a wake-up each,
/// taken from the compute threads).
///
/// The window (Options::credit_bytes, Options::inflight_units) bounds what is on the wire at once
/// so a late, urgent unit waits for little; a unit larger than the credit still goes, alone.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "../core/options.hpp"
#include "../detail/backoff.hpp"
#include "../priority/lanes.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "control.hpp"
#include "tags.hpp"
#include "units.hpp"

namespace gradsync::schedule {

/// A unit decided for execution in a given iteration.
struct Decision {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  std::uint32_t key = 0;  ///< the unit's priority key when rank 0 decided (collective::Job::priority)
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
    control_.change([&] {  // nothing waits for the window to fill
      ++inflight_units_;
      inflight_bytes_ += bytes;
    });
    return true;
  }
  /// Frees `bytes`; the caller holds the control's lock (inside Control::update, which wakes a
  /// chooser waiting for room).
  void give_back_locked(std::size_t bytes) {
    --inflight_units_;
    inflight_bytes_ -= bytes;
  }

 private:
  Control& control_;
  std::size_t credit_, units_;
  std::size_t inflight_units_ = 0, inflight_bytes_ = 0;  // guarded by the control's lock
};

class Leader {
 public:
  /// Units per readiness message.
  static constexpr std::size_t report_units = 64;

  Leader(transport::Transport& t, Control& control, const Options& options, const std::vector<std::size_t>& lanes,
         const UnitTable& table)
      : t_(t), control_(control), table_(table), lanes_(lanes),
        window_(control, options.credit_bytes, options.inflight_units),
        arrived_(std::make_unique<std::atomic<int>[]>(table.size())),
        key_(std::make_unique<std::atomic<std::uint32_t>[]>(table.size())),
        reported_(std::make_unique<std::atomic<std::int64_t>[]>(table.size() * followers())),
        report_(2 + table.size()) {
    for (std::size_t i = 0; i < table.size() * followers(); ++i) reported_[i].store(-1);
  }

  /// Takes in the units that become ready on this rank in `iteration`: hand_over(sink) calls
  /// sink(u) for each; key(u) is unit u's priority now. The other ranks report them to rank 0 in
  /// messages of up to report_units, without allocating. Called on the caller's thread; never
  /// waits for a peer.
  template <class Key, class HandOver>
  void ready(std::int64_t iteration, Key&& key, HandOver&& hand_over) {
    std::array<std::uint32_t, report_units> batch;
    std::size_t n = 0;
    const auto flush = [&] {
      take_in(std::span(batch).first(n), iteration, key);
      n = 0;
    };
    hand_over([&](std::uint32_t u) {
      batch[n++] = u;
      if (n == batch.size()) flush();
    });
    flush();
  }
  /// Unit u's collective finished on this rank; call it inside Control::update (it frees the
  /// unit's credit, and the update wakes a chooser waiting for room).
  void finished(std::uint32_t u) {
    if (leads()) window_.give_back_locked(bytes(u));
  }
  /// The next unit to run, in rank 0's order, for the calling executor; nothing once stopping.
  /// `sequence` receives the decision's index, the same on every rank.
  std::optional<Decision> next(std::uint64_t& sequence) {
    std::lock_guard lock(choosing_);
    const auto d = leads() ? decide() : receive();
    if (d) sequence = decided_++;
    return d;
  }
  /// Wakes a chooser waiting for a ready unit after Control::stop() (call it only then).
  void stop() {
    lanes_.wake();
    handed_over_.fetch_add(1);  // a change wakes a sleeping chooser (after Control::stop: it sees the stop)
    handed_over_.notify_all();
  }

  /// Calls each(transport::Wait) for every rank this one waits for to go on choosing: on rank 0,
  /// each rank that has not reported a unit that is ready here (since the oldest such unit became
  /// ready); elsewhere rank 0, while its decision is awaited. What schedule::Watchdog asks when a
  /// wait times out: a missing report or decision may only follow from another rank's silence.
  template <class F>
  void waits(F&& each) const {
    if (!leads()) {
      if (const auto since = receiving_since_.load(); since != never) each(transport::Wait{0, since});
      return;
    }
    for (int r = 1; r < t_.size(); ++r) {
      auto oldest = never;
      for (std::uint32_t u = 0; u < table_.size(); ++u) {
        const std::int64_t it = table_.ready_iteration(u);
        if (it >= 0 && reported(r, u).load() < it) oldest = std::min(oldest, table_.ready_at(u));
      }
      if (oldest != never) each(transport::Wait{r, oldest});
    }
  }

 private:
  bool leads() const { return t_.rank() == 0; }

  // `units` became ready on this rank: queued (rank 0), or reported to rank 0 in one message.
  template <class Key>
  void take_in(std::span<const std::uint32_t> units, std::int64_t iteration, Key& key) {
    if (units.empty()) return;
    if (leads()) {
      for (std::uint32_t u : units) {
        key_[u].store(key(u));
        arrive(u);
      }
    } else {
      report_message(units, iteration);
      control_.notify();  // an executor may be waiting for one of them
    }
    handed_over_.fetch_add(units.size());
    handed_over_.notify_all();  // a chooser may sleep until this rank has undecided units
  }
  std::size_t followers() const { return static_cast<std::size_t>(t_.size() - 1); }
  std::size_t bytes(std::uint32_t u) const { return table_.unit(u).elements * sizeof(float); }
  std::atomic<std::int64_t>& reported(int rank, std::uint32_t u) const {
    return reported_[static_cast<std::size_t>(rank - 1) * table_.size() + u];
  }

  // Rank 0: one rank more has unit u ready; queued once every rank has. A rank's next iteration
  // of u cannot arrive before this one is complete: it needs u of this iteration aggregated.
  void arrive(std::uint32_t u) {
    if (arrived_[u].fetch_add(1) + 1 < t_.size()) return;
    arrived_[u].fetch_sub(t_.size());
    lanes_.push(key_[u].load(), u);
  }

  // A follower: one message [iteration (2 words), units] to rank 0, without allocating.
  void report_message(std::span<const std::uint32_t> units, std::int64_t iteration) {
    std::array<std::uint32_t, 2 + report_units> msg;
    std::memcpy(msg.data(), &iteration, sizeof iteration);
    std::ranges::copy(units, msg.begin() + 2);
    t_.send(0, ready_tag, std::as_bytes(std::span(msg).first(2 + units.size())));
  }

  // Rank 0, while choosing: takes in every report that has come (then the choice sees them all).
  void take_reports() {
    for (int r = 1; r < t_.size(); ++r)
      while (const auto got = t_.try_recv(r, ready_tag, std::as_writable_bytes(std::span(report_)))) {
        const std::size_t words = *got / sizeof(std::uint32_t);
        std::int64_t iteration = -1;
        if (*got % sizeof(std::uint32_t) == 0 && words >= 2) std::memcpy(&iteration, report_.data(), sizeof iteration);
        if (iteration < 0) throw malformed_report(r, "of " + std::to_string(*got) + " bytes");
        for (std::uint32_t u : std::span(report_).subspan(2, words - 2)) {
          if (u >= table_.size() || reported(r, u).load() >= iteration)
            throw malformed_report(r, "of unit " + std::to_string(u) + " in iteration " + std::to_string(iteration));
          reported(r, u).store(iteration);
          arrive(u);
        }
      }
  }
  PeerError malformed_report(int rank, const std::string& what) const {
    return PeerError("gradsync: " + t_.describe() + " got a malformed readiness report " + what + " from rank " +
                     std::to_string(rank) + ": the ranks run different gradsync builds, or a message was corrupted");
  }

  // While every unit this rank handed over is decided, no decision can come: sleeps until
  // gradient_ready hands over more (or the synchronizer stops). False when there was no need.
  // Called by the chooser, under choosing_.
  bool sleep_while_all_decided() {
    bool slept = false;
    for (;;) {
      const std::uint64_t handed = handed_over_.load();
      if (handed != decided_ || control_.stopping()) return slept;
      receiving_since_.store(never);  // waiting for this rank's own trainer, not for a peer
      handed_over_.wait(handed);
      slept = true;
    }
  }

  // Rank 0: as late as possible, once the window has room, the most urgent unit ready everywhere.
  std::optional<Decision> decide() {
    detail::Backoff backoff;
    while (window_.wait_for_room()) {
      const std::uint64_t seen = lanes_.pushes();
      take_reports();
      const auto u = lanes_.try_pop();
      if (!u) {
        if (control_.stopping()) continue;
        if (t_.size() == 1) {
          lanes_.wait_for_push(seen);
        } else if (!sleep_while_all_decided()) {
          backoff.pause();  // reports come over the transport: poll it
          continue;
        }
        backoff = {};
        continue;
      }
      if (!window_.take(bytes(*u))) return std::nullopt;
      const Decision d{table_.ready_iteration(*u), *u, key_[*u].load()};
      for (int r = 1; r < t_.size(); ++r) t_.send(r, decision_tag, std::as_bytes(std::span(&d, 1)));
      return d;
    }
    return std::nullopt;
  }

  // The other ranks: rank 0's next decision.
  std::optional<Decision> receive() {
    receiving_since_.store(UnitTable::clock::now());
    const auto received = [&](std::optional<Decision> d) {
      receiving_since_.store(never);
      return d;
    };
    while (!control_.stopping()) {
      if (sleep_while_all_decided()) {
        receiving_since_.store(UnitTable::clock::now());  // waiting for rank 0 again
        continue;
      }
      Decision d;
      const auto got = t_.recv_for(0, decision_tag, std::as_writable_bytes(std::span(&d, 1)),
                                   std::chrono::milliseconds(50));
      if (!got) continue;
      if (*got != sizeof d || d.unit >= table_.size())
        throw PeerError("gradsync: " + t_.describe() + " got a malformed schedule message from rank 0");
      return received(d);
    }
    return received(std::nullopt);
  }

  transport::Transport& t_;
  Control& control_;
  const UnitTable& table_;
  priority::Lanes lanes_;
  CreditWindow window_;
  // Rank 0's view of readiness: per unit, how many ranks have it ready in its current iteration
  // and its key, and per follower and unit the latest iteration reported.
  std::unique_ptr<std::atomic<int>[]> arrived_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> key_;
  std::unique_ptr<std::atomic<std::int64_t>[]> reported_;
  std::vector<std::uint32_t> report_;  // a report being read (the chooser's)
  // A follower: since when its chooser has waited for rank 0's decision (never: not waiting).
  static constexpr auto never = UnitTable::clock::time_point::max();
  std::atomic<UnitTable::clock::time_point> receiving_since_{never};
  std::mutex choosing_;        // one executor chooses at a time: every rank runs rank 0's order
  std::uint64_t decided_ = 0;  // decisions taken so far (guarded by choosing_)
  // Units this rank handed over; equal to decided_, no decision can come (idle chooser).
  std::atomic<std::uint64_t> handed_over_{0};
};

}  // namespace gradsync::schedule
