#pragma once
/// Follower: the other ranks' half of the Leader (schedule/leader.hpp). It reports the units that
/// become ready here to rank 0, in messages of up to Decider::report_units, without allocating,
/// and receives rank 0's decisions, in order.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "../core/error.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "control.hpp"
#include "decider.hpp"
#include "decision.hpp"
#include "tags.hpp"
#include "undecided.hpp"
#include "units.hpp"

namespace gradsync::schedule {

class Follower {
 public:
  Follower(transport::Transport& t, Control& control, const UnitTable& table)
      : t_(t), control_(control), table_(table) {}

  /// One message [iteration (2 words), units] to rank 0. An executor here may already hold the
  /// decision of one of them and wait for it to be ready: woken.
  void report(std::span<const std::uint32_t> units, std::int64_t iteration) {
    std::array<std::uint32_t, 2 + Decider::report_units> msg;
    std::memcpy(msg.data(), &iteration, sizeof iteration);
    std::ranges::copy(units, msg.begin() + 2);
    t_.send(0, ready_tag, std::as_bytes(std::span(msg).first(2 + units.size())));
    control_.notify();
  }

  /// Rank 0's next decision; nothing once stopping. The chooser's.
  std::optional<Decision> receive(Undecided& undecided) {
    const auto waiting_since = [&](UnitTable::clock::time_point t) { receiving_since_.store(t); };
    waiting_since(UnitTable::clock::now());
    while (!control_.stopping()) {
      // Waiting for this rank's own trainer, not for rank 0, while nothing here is undecided.
      if (undecided.sleep_while_none(control_, [&] { waiting_since(never); })) {
        waiting_since(UnitTable::clock::now());
        continue;
      }
      Decision d;
      const auto got = t_.recv_for(0, decision_tag, std::as_writable_bytes(std::span(&d, 1)),
                                   std::chrono::milliseconds(50));
      if (!got) continue;
      if (*got != sizeof d || d.unit >= table_.size())
        throw PeerError("gradsync: " + t_.describe() + " got a malformed schedule message from rank 0");
      waiting_since(never);
      return d;
    }
    waiting_since(never);
    return std::nullopt;
  }

  /// Calls each(transport::Wait) with rank 0 while its decision is awaited.
  template <class F>
  void waits(F&& each) const {
    if (const auto since = receiving_since_.load(); since != never) each(transport::Wait{0, since});
  }

 private:
  static constexpr auto never = UnitTable::clock::time_point::max();

  transport::Transport& t_;
  Control& control_;
  const UnitTable& table_;
  std::atomic<UnitTable::clock::time_point> receiving_since_{never};
};

}  // namespace gradsync::schedule
