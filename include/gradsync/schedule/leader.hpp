#pragma once
/// Leader: rank 0's ordering protocol, as every rank's executors see it. There is no thread of its
/// own: an executor that is free asks next() for its next unit. On rank 0 the Decider waits for
/// room in the credit window, takes the most urgent unit that is ready on every rank and tells
/// every rank to run it next (schedule/decider.hpp); on the other ranks the Follower reports
/// readiness to rank 0 and receives its decisions (schedule/follower.hpp). One executor chooses at
/// a time, so every rank runs the decisions in the same order: collectives that need every rank at
/// once (ring) cannot deadlock however differently the ranks' backward passes are timed, and a more
/// urgent unit overtakes everything still queued at the next unit boundary (P3). Choosing on the
/// executor that will run the unit saves a thread hand-off (a wake-up) per unit on every rank.
///
/// \code
///   schedule::Leader leader(transport, control, options, lane_capacities, table);
///   leader.ready(iteration, key, [&](auto sink) { table.hand_over(layer, grad, iteration, sink); });
///   std::uint64_t seq;
///   while (auto d = leader.next(seq)) run(*d);   // each executor thread; nothing once stopping
///   control.update([&] { leader.finished(u); }); // its collective is done: frees its credit
///   leader.stop();                               // after Control::stop(): wakes a waiting chooser
/// \endcode
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "../core/options.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"
#include "decider.hpp"
#include "decision.hpp"
#include "follower.hpp"
#include "undecided.hpp"
#include "units.hpp"

namespace gradsync::schedule {

class Leader {
 public:
  Leader(transport::Transport& t, Control& control, const Options& options, const std::vector<std::size_t>& lanes,
         const UnitTable& table) {
    if (t.rank() == 0) decider_.emplace(t, control, options, lanes, table);
    else follower_.emplace(t, control, table);
  }

  /// Takes in the units that become ready on this rank in `iteration`: hand_over(sink) calls
  /// sink(u) for each; key(u) is unit u's priority now. Rank 0 queues them; the others report them
  /// in batches. Called on the caller's thread; never waits for a peer.
  template <class Key, class HandOver>
  void ready(std::int64_t iteration, Key&& key, HandOver&& hand_over) {
    std::array<std::uint32_t, Decider::report_units> batch;
    std::size_t n = 0;
    const auto flush = [&] {
      if (n == 0) return;
      const auto units = std::span(batch).first(n);
      if (decider_) decider_->take_in(units, key);
      else follower_->report(units, iteration);
      undecided_.handed_over(n);
      n = 0;
    };
    hand_over([&](std::uint32_t u) {
      batch[n++] = u;
      if (n == batch.size()) flush();
    });
    flush();
  }
  /// The next unit to run, in rank 0's order, for the calling executor; nothing once stopping.
  /// `sequence` receives the decision's index, the same on every rank.
  std::optional<Decision> next(std::uint64_t& sequence) {
    std::lock_guard lock(choosing_);
    const auto d = decider_ ? decider_->decide(undecided_) : follower_->receive(undecided_);
    if (d) sequence = undecided_.decided();
    return d;
  }
  /// Unit u's collective finished on this rank; call it inside Control::update (it frees the
  /// unit's credit, and the update wakes a chooser waiting for room).
  void finished(std::uint32_t u) {
    if (decider_) decider_->finished(u);
  }
  /// Wakes a chooser waiting for a ready unit after Control::stop() (call it only then).
  void stop() {
    if (decider_) decider_->stop();
    undecided_.wake();
  }

  /// Calls each(transport::Wait) for every rank this one waits for to go on choosing: on rank 0,
  /// each rank that has not reported a unit that is ready here; elsewhere rank 0, while its
  /// decision is awaited. What schedule::Watchdog asks when a wait times out: a missing report or
  /// decision may only follow from another rank's silence.
  template <class F>
  void waits(F&& each) const {
    if (decider_) decider_->waits(each);
    else follower_->waits(each);
  }

 private:
  std::optional<Decider> decider_;    // rank 0
  std::optional<Follower> follower_;  // every other rank
  Undecided undecided_;
  std::mutex choosing_;  // one executor chooses at a time: every rank runs rank 0's order
};

}  // namespace gradsync::schedule
