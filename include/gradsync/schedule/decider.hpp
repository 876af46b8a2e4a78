#pragma once
/// Decider: rank 0's half of the Leader (schedule/leader.hpp). It counts, per unit, the ranks that
/// have it ready (its own hand-overs and the other ranks' readiness reports), queues a unit by its
/// priority key once every rank has it, and, as late as possible - once the credit window has
/// room - takes the most urgent queued unit and tells every rank to run it next.
///
/// Ready on every rank, not on rank 0 alone: a unit chosen because it is ready on rank 0 only
/// makes every other rank's executor wait for its own backward pass while units ready everywhere
/// queue behind it, and the link idles meanwhile (Horovod's coordinator agrees on readiness the
/// same way).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/options.hpp"
#include "../detail/backoff.hpp"
#include "../priority/lanes.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "control.hpp"
#include "credit_window.hpp"
#include "decision.hpp"
#include "tags.hpp"
#include "undecided.hpp"
#include "units.hpp"

namespace gradsync::schedule {

class Decider {
 public:
  /// The longest readiness report, in units.
  static constexpr std::size_t report_units = 64;

  Decider(transport::Transport& t, Control& control, const Options& options, const std::vector<std::size_t>& lanes,
          const UnitTable& table)
      : t_(t), control_(control), table_(table), lanes_(lanes),
        window_(control, options.credit_bytes, options.inflight_units),
        arrived_(std::make_unique<std::atomic<int>[]>(table.size())),
        key_(std::make_unique<std::atomic<std::uint32_t>[]>(table.size())),
        reported_(std::make_unique<std::atomic<std::int64_t>[]>(table.size() * followers())),
        report_(2 + report_units) {
    for (std::size_t i = 0; i < table.size() * followers(); ++i) reported_[i].store(-1);
  }

  /// `units` became ready on rank 0; key(u) is unit u's priority now.
  template <class Key>
  void take_in(std::span<const std::uint32_t> units, Key& key) {
    for (std::uint32_t u : units) {
      key_[u].store(key(u));
      arrive(u);
    }
  }

  /// The next decision, sent to every rank; nothing once stopping. The chooser's.
  std::optional<Decision> decide(Undecided& undecided) {
    gradsync::detail::Backoff backoff;
    while (window_.wait_for_room()) {
      const std::uint64_t seen = lanes_.pushes();
      take_reports();
      const auto u = lanes_.try_pop();
      if (!u) {
        if (control_.stopping()) continue;
        if (t_.size() == 1) {
          lanes_.wait_for_push(seen);
        } else if (!undecided.sleep_while_none(control_, [] {})) {
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

  /// Unit u's collective finished; the caller holds the control's lock (Control::update).
  void finished(std::uint32_t u) { window_.give_back_locked(bytes(u)); }
  /// Wakes a chooser waiting for a queued unit (after Control::stop()).
  void stop() { lanes_.wake(); }

  /// Calls each(transport::Wait) for every rank that has not reported a unit that is ready here,
  /// since the oldest such unit became ready: the ranks rank 0 waits for to go on deciding.
  template <class F>
  void waits(F&& each) const {
    for (int r = 1; r < t_.size(); ++r) {
      auto oldest = UnitTable::clock::time_point::max();
      for (std::uint32_t u = 0; u < table_.size(); ++u) {
        const std::int64_t it = table_.ready_iteration(u);
        if (it >= 0 && reported(r, u).load() < it) oldest = std::min(oldest, table_.ready_at(u));
      }
      if (oldest != UnitTable::clock::time_point::max()) each(transport::Wait{r, oldest});
    }
  }

 private:
  std::size_t followers() const { return static_cast<std::size_t>(t_.size() - 1); }
  std::size_t bytes(std::uint32_t u) const { return table_.unit(u).elements * sizeof(float); }
  std::atomic<std::int64_t>& reported(int rank, std::uint32_t u) const {
    return reported_[static_cast<std::size_t>(rank - 1) * table_.size() + u];
  }

  // One rank more has unit u ready; queued once every rank has. A rank's next iteration of u
  // cannot arrive before this one is complete: it needs u of this iteration aggregated.
  void arrive(std::uint32_t u) {
    if (arrived_[u].fetch_add(1) + 1 < t_.size()) return;
    arrived_[u].fetch_sub(t_.size());
    lanes_.push(key_[u].load(), u);
  }

  // Takes in every report that has come (then the choice sees them all).
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

  transport::Transport& t_;
  Control& control_;
  const UnitTable& table_;
  priority::Lanes lanes_;
  CreditWindow window_;
  // Per unit, how many ranks have it ready in its current iteration and its key; per follower and
  // unit, the latest iteration reported.
  std::unique_ptr<std::atomic<int>[]> arrived_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> key_;
  std::unique_ptr<std::atomic<std::int64_t>[]> reported_;
  std::vector<std::uint32_t> report_;  // a report being read (the chooser's)
};

}  // namespace gradsync::schedule
