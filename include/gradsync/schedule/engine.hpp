#pragma once
/// Engine: what runs a Synchronizer's plan. It shakes hands with the peers, then owns the unit
/// table, the Leader (rank 0's order), the collective's state, the executors and their threads,
/// one Control and one Watchdog over every wait, and the iteration count. The Synchronizer checks
/// the caller's input against the plan and forwards here.
///
/// How a unit travels. hand_over (gradient_ready) marks the layer's units (schedule/units.hpp); a
/// unit whose layers are all in is ready; the other ranks report their newly ready units to rank 0. A free executor
/// on rank 0 takes the most urgent unit ready on every rank while the credit window allows and
/// tells every rank to run it next (schedule/leader.hpp); the executors of every rank take rank 0's
/// decisions in order and run each unit's collective (schedule/executor.hpp), and the aggregate is
/// written back into the caller's span. Every wait goes through one Control (schedule/control.hpp)
/// and one transport::Cancellable, and one watchdog (schedule/watchdog.hpp) owns Options::timeout:
/// it turns a wait that lasted it into an error naming the rank to blame (a dead one, every time),
/// and a failure on any rank stops every rank at once.
///
/// \code
///   schedule::Plan<Slicing, Priority, Codec, Collective> plan(layout, options, policies, transport.size());
///   schedule::Engine engine(transport, plan);   // handshake, then the threads
///   engine.hand_over(layer, grad);  engine.wait(layer, "wait_for");  engine.finish_iteration();
/// \endcode
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../codec/memory.hpp"
#include "../collective/concept.hpp"
#include "../core/error.hpp"
#include "../core/statistics.hpp"
#include "../transport/cancellable.hpp"
#include "control.hpp"
#include "executor.hpp"
#include "leader.hpp"
#include "plan.hpp"
#include "units.hpp"
#include "watchdog.hpp"

namespace gradsync::schedule {

template <class Slicing, class Priority, class Codec, class Collective>
class Engine {
 public:
  /// `user` and `plan` outlive the engine. Throws what the handshake finds.
  Engine(transport::Transport& user, Plan<Slicing, Priority, Codec, Collective>& plan);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Lets in-flight units finish (the peers need this rank for them; the watchdog gives up after
  /// the timeout), then stops the threads. In the middle of an iteration (some layers handed over,
  /// not all) it first tells every peer this rank stopped, so they fail at once.
  ~Engine();

  /// Marks `layer`'s units for this iteration and reports the ready ones to rank 0, once the
  /// previous iteration's units of the layer are done with `grad`.
  void hand_over(std::size_t layer, std::span<float> grad) {
    rethrow_if_failed();
    const std::int64_t iter = iteration_.load();
    if (table_.submitted(layer) == iter)
      throw UsageError("gradsync: gradient_ready called twice for layer " + std::to_string(layer) + " ('" +
                       plan_.layout.layer(layer).name + "') in iteration " + std::to_string(iter) +
                       "; call finish_iteration() after each backward pass");
    wait(layer, "gradient_ready");
    leader_.ready(
        iter, [&](std::uint32_t u) { return plan_.policies.priority.key(table_.unit(u)); },
        [&](const auto& ready) { table_.hand_over(layer, grad, iter, ready); });
  }

  /// Until `layer`'s latest hand-over is aggregated; throws this rank's error (PeerError after the
  /// timeout, schedule/watchdog.hpp). `who` names the caller in errors.
  void wait(std::size_t layer, const char* who) {
    const bool done = watchdog_.wait([&] { return table_.layer_done(layer); }, who, layer);
    rethrow_if_failed();
    if (!done)
      throw UsageError("gradsync: " + std::string(who) + "(" + std::to_string(layer) +
                       "): the synchronizer is being destroyed on another thread");
  }

  /// Ends the iteration; every layer must have been handed over.
  void finish_iteration() {
    rethrow_if_failed();
    const std::int64_t iter = iteration_.load();
    std::string missing;
    for (std::size_t i = 0; i < table_.layers() && missing.size() < 200; ++i)
      if (table_.submitted(i) != iter) missing += (missing.empty() ? "" : ", ") + plan_.layout.layer(i).name;
    if (!missing.empty())
      throw UsageError("gradsync: finish_iteration(): no gradient_ready in iteration " + std::to_string(iter) +
                       " for layer(s) " + missing + "; every rank must hand over every layer each iteration");
    iteration_.store(iter + 1);
    stats_.iteration();
  }

  /// Fails this rank and tells every peer. Idempotent.
  void abort(const std::string& reason) {
    watchdog_.fail(std::make_exception_ptr(PeerError("gradsync: " + user_.describe() + " stopped: " + reason)));
  }

  /// Whether `p` is in GPU memory, for the transport or the codec.
  bool device_memory(const float* p) const { return t_.device_memory(p) || codec::device_memory(plan_.policies.codec, p); }

  StatisticsRecorder& recorder() { return stats_; }
  Statistics stats() const {
    Statistics s = stats_.snapshot();
    s.counters = state_->counters();
    return s;
  }

  UnitTable& table() { return table_; }
  const UnitTable& table() const { return table_; }
  /// What the collective keeps for this synchronizer (its loss reports, counters, checkpoint).
  collective::Runtime& runtime() const { return *state_; }
  std::int64_t iteration() const { return iteration_.load(); }
  /// For a restored checkpoint, before the first hand-over.
  void resume_at(std::int64_t iteration) { iteration_.store(iteration); }

 private:
  /// Throws this rank's first error, if it failed, once no executor touches the caller's spans
  /// any more: the caller may free them as soon as a call throws.
  void rethrow_if_failed() {
    if (!control_.failed()) return;
    control_.settle([&] { return executors_.idle(); });
    control_.rethrow_if_failed();
  }

  template <class F>
  void guarded(F&& body) {
    try {
      body();
    } catch (...) {
      if (!control_.stopping()) watchdog_.fail(std::current_exception());  // else: the shutdown's own cancellation
    }
  }

  transport::Transport& user_;  // the caller's transport: abort messages use it even after t_ is cancelled
  Plan<Slicing, Priority, Codec, Collective>& plan_;
  transport::Cancellable t_;    // every other message: one timeout, and waits that end on failure
  // The handshake's session: every rank has agreed on the plan before anything else starts.
  const std::uint64_t session_;
  Control control_;
  StatisticsRecorder stats_;
  UnitTable table_;
  Leader leader_;
  // What the collective keeps for this synchronizer, started once every rank agreed.
  const std::unique_ptr<collective::state_t<Collective>> state_;
  Executors<Priority, Codec, Collective> executors_;
  Watchdog watchdog_;  // after what it watches: its thread stops before they go
  std::vector<std::thread> threads_;
  std::atomic<std::int64_t> iteration_{0};
};


// Out of the class body, so that an explicit instantiation declaration (any_synchronizer.hpp's,
// for gradsync::any) keeps every translation unit from instantiating the threads' whole path.
template <class Slicing, class Priority, class Codec, class Collective>
Engine<Slicing, Priority, Codec, Collective>::Engine(transport::Transport& user,
                                                     Plan<Slicing, Priority, Codec, Collective>& plan)
    : user_(user), plan_(plan), t_(user_, plan.options.timeout), session_(handshake(t_, plan.hello)),
      table_(plan.layout, plan.units, plan.fp32_below, plan.residuals, plan.policies.slicing.describe()),
      leader_(t_, control_, plan.options, plan.lane_capacity, table_),
      state_(collective::start(plan.policies.collective, {.transport = t_, .elements = table_.elements(),
                                                          .lane_capacity = plan.lane_capacity, .session = session_})),
      executors_({t_, plan.policies.priority, plan.policies.codec, plan.policies.collective, *state_, plan.layout,
                  table_, leader_, control_, stats_, plan.options}),
      watchdog_({user_, t_, control_, &leader_, [this] { return state_->stall(); }}, session_, plan.options.timeout) {
  for (std::size_t i = 0; i < executors_.size(); ++i)
    threads_.emplace_back([this, i] { guarded([this, i] { executors_.run(executors_.slot(i)); }); });
  watchdog_.start();
}

template <class Slicing, class Priority, class Codec, class Collective>
Engine<Slicing, Priority, Codec, Collective>::~Engine() {
  const std::int64_t iter = iteration_.load();
  std::size_t handed = 0;
  for (std::size_t l = 0; l < table_.layers(); ++l) handed += table_.submitted(l) == iter;
  if (handed > 0 && handed < table_.layers())
    abort("its Synchronizer was destroyed in the middle of iteration " + std::to_string(iter) + " (" +
          std::to_string(handed) + " of " + std::to_string(table_.layers()) + " layers handed over)");
  watchdog_.wait([&] { return table_.all_done(); }, "~Synchronizer", 0);
  watchdog_.stop(std::make_exception_ptr(UsageError("gradsync: the synchronizer was destroyed")));
  state_->stop();
  for (auto& th : threads_) th.join();
}

}  // namespace gradsync::schedule
