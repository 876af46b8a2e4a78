#pragma once
/// IssueOrder: vendor collectives (MPI, NCCL) carry no tag and must be issued in the same order on
/// every rank. Units run on several executor threads, so the native collectives issue them in
/// Job::sequence order (the schedule order, identical on every rank) and then let them progress
/// concurrently. Copies share the order: use one collective object per Synchronizer.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "../transport/transport.hpp"
#include "concept.hpp"

namespace gradsync::collective::detail {

class IssueOrder {
 public:
  /// Runs `issue` once every unit earlier in the schedule has been issued (at once when the job
  /// has no sequence: the caller runs one unit at a time). `who` names the collective in errors.
  template <class F>
  void run(const Job& job, const transport::Transport& t, const char* who, F&& issue) const {
    run(job, job.sequence, t, who, std::forward<F>(issue));
  }
  /// As run, at position `slot` of this order instead of the unit's sequence: a collective that
  /// issues several vendor calls per unit numbers them (e.g. 2 * sequence and 2 * sequence + 1).
  template <class F>
  void run(const Job& job, std::optional<std::uint64_t> slot, const transport::Transport& t, const char* who,
           F&& issue) const {
    if (!slot) return issue();
    std::unique_lock lock(state_->mutex);
    if (!state_->turn.wait_for(lock, t.timeout(), [&] { return state_->next == *slot; }))
      throw PeerError("gradsync: " + t.describe() + ": collective '" + who + "' waited " +
                      std::to_string(t.timeout().count()) + " ms to issue unit " + std::to_string(job.tag) +
                      " (issue position " + std::to_string(*slot) + ", next to issue " +
                      std::to_string(state_->next) + "): an earlier unit never became ready on this rank");
    issue();
    ++state_->next;
    lock.unlock();
    state_->turn.notify_all();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable turn;
    std::uint64_t next = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace gradsync::collective::detail
