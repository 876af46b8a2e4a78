#pragma once
/// Synchronizer<Slicing, Priority, Codec, Collective>: the one type users hold.
///
/// \code
///   using Sync = gradsync::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                                       gs::codec::Qsgd<8>, gs::collective::Ring>;
///   Sync sync{transport, layout};                                  // the papers' defaults, or:
///   Sync tuned{transport, layout, {.timeout = std::chrono::seconds(60)},
///              {.slicing = {.max_elements = 50'000}, .codec = {.bucket = 1024}}};
///   for (step...) {
///     for (l in layers)           { sync.wait_for(l); optimizer.step(l); forward(l); }
///     for (l in reversed(layers)) { backward(l); sync.gradient_ready(l, grad(l)); }
///     sync.finish_iteration();
///   }
///   sync.wait_all();
/// \endcode
///
/// How it works. gradient_ready marks the layer's units (schedule/units.hpp); a unit whose layers
/// are all in is ready; the other ranks report their newly ready units to rank 0. A free executor
/// on rank 0 takes the most urgent unit ready on every rank while the credit window allows and
/// tells every rank to run it next (schedule/leader.hpp); the executors of every rank take rank 0's
/// decisions in order and run each unit's collective (schedule/executor.hpp), and the aggregate is
/// written back into the caller's span. Every wait goes through one Control (schedule/control.hpp)
/// and one transport::Cancellable, and one watchdog (schedule/watchdog.hpp) owns Options::timeout:
/// it turns a wait that lasted it into an error naming the rank to blame (a dead one, every time),
/// and a failure on any rank stops every rank at once.
///
/// \tparam Slicing     how layers become units (slicing::FixedSlices, Fusion, WholeLayer, ...)
/// \tparam Priority    which ready unit goes first (priority::ForwardOrder, Fifo, ...)
/// \tparam Codec       how a unit is put on the wire (codec::Identity, Qsgd<8>, ...)
/// \tparam Collective  how a unit is aggregated (collective::Ring, ParameterServer, ...)
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "codec/concept.hpp"
#include "codec/memory.hpp"
#include "codec/traits.hpp"
#include "collective/concept.hpp"
#include "core/layout.hpp"
#include "core/options.hpp"
#include "core/statistics.hpp"
#include "priority/concept.hpp"
#include "schedule/control.hpp"
#include "schedule/executor.hpp"
#include "schedule/leader.hpp"
#include "schedule/plan.hpp"
#include "schedule/units.hpp"
#include "schedule/watchdog.hpp"
#include "slicing/concept.hpp"
#include "transport/cancellable.hpp"

namespace gradsync {

template <class Slicing, class Priority, class Codec, class Collective>
class Synchronizer {
  GRADSYNC_CHECK_SLICING(Slicing);
  GRADSYNC_CHECK_PRIORITY(Priority);
  GRADSYNC_CHECK_CODEC(Codec);
  GRADSYNC_CHECK_COLLECTIVE(Collective);
  GRADSYNC_CHECK_ACCEPTS(Collective, Codec);
  using clock = std::chrono::steady_clock;

 public:
  /// The policy objects, by name: `{.codec = {.bucket = 1024}, .collective = {.group = 4}}`.
  using Policies = schedule::Policies<Slicing, Priority, Codec, Collective>;

  Synchronizer(transport::Transport& transport, ModelLayout layout, Options options = {}, Policies policies = {})
      : user_(transport), plan_(std::move(layout), std::move(options), std::move(policies), transport.size()),
        t_(user_, plan_.options.timeout),
        table_(plan_.layout, plan_.units, plan_.fp32_below, plan_.residuals, plan_.policies.slicing.describe()),
        leader_(t_, control_, plan_.options, plan_.lane_capacity, table_),
        executors_({t_, plan_.policies.priority, plan_.policies.codec, plan_.policies.collective, runtime_,
                    plan_.layout, table_, leader_, control_, stats_, plan_.options}),
        watchdog_({user_, t_, control_, &leader_, [this] { return runtime_ ? runtime_->stall() : transport::Wait{}; }},
                  schedule::handshake(t_, plan_.hello), plan_.options.timeout) {
    std::vector<std::size_t> elements;
    for (const Unit& u : table_.units()) elements.push_back(u.elements);
    runtime_ = collective::start(plan_.policies.collective, {.transport = t_, .elements = std::move(elements),
                                                             .lane_capacity = plan_.lane_capacity,
                                                             .session = watchdog_.session()});
    for (std::size_t i = 0; i < executors_.size(); ++i)
      threads_.emplace_back([this, i] { guarded([this, i] { executors_.run(executors_.slot(i)); }); });
    watchdog_.start();
  }
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  /// Stops the threads after in-flight units finish (call wait_all() first to see their errors;
  /// gives up after Options::timeout). Destroyed in the middle of an iteration (some layers handed
  /// over, not all) or with units stuck in flight, it tells every peer this rank stopped, so they
  /// fail at once instead of waiting for it.
  ~Synchronizer() {
    const std::int64_t iter = iteration_.load();
    std::size_t handed = 0;
    for (std::size_t l = 0; l < table_.layers(); ++l) handed += table_.submitted(l) == iter;
    if (handed > 0 && handed < table_.layers())
      abort("its Synchronizer was destroyed in the middle of iteration " + std::to_string(iter) + " (" +
            std::to_string(handed) + " of " + std::to_string(table_.layers()) + " layers handed over)");
    // Let in-flight units finish (peers need this rank for them); the watchdog fails it after the timeout.
    watchdog_.wait([&] { return table_.all_done(); }, "~Synchronizer", 0);
    watchdog_.stop(std::make_exception_ptr(UsageError("gradsync: the synchronizer was destroyed")));
    runtime_->stop();
    for (auto& th : threads_) th.join();
  }

  /// Hands over layer `layer`'s gradient of this iteration. Returns at once, except when the
  /// previous iteration's units of this layer are still in flight (nobody called wait_for(layer)
  /// since its last hand-over): then it first waits for them, as wait_for(layer) would, and throws
  /// PeerError when that lasts Options::timeout (schedule/watchdog.hpp has the exact bound). `grad`
  /// must stay alive and untouched until wait_for(layer) returns: it is overwritten with the aggregate.
  /// GPU memory works with a codec that keeps units there (cuda::OnDevice) or with the NCCL
  /// collectives over transport::Nccl, as device_refusal(layer) says; the kernels that wrote it
  /// must have finished (synchronize their stream first): gradsync's streams do not wait for yours.
  void gradient_ready(std::size_t layer, std::span<float> grad) {
    rethrow_if_failed();
    check_layer(layer, "gradient_ready");
    if (grad.size() != plan_.layout.layer(layer).elements)
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): span has " + std::to_string(grad.size()) +
                       " elements but layer '" + plan_.layout.layer(layer).name + "' has " +
                       std::to_string(plan_.layout.layer(layer).elements) + " in the ModelLayout");
    if (t_.device_memory(grad.data()) || codec::device_memory(plan_.policies.codec, grad.data())) check_device_layer(layer);
    const std::int64_t iter = iteration_.load();
    if (table_.submitted(layer) == iter)
      throw UsageError("gradsync: gradient_ready called twice for layer " + std::to_string(layer) + " ('" +
                       plan_.layout.layer(layer).name + "') in iteration " + std::to_string(iter) +
                       "; call finish_iteration() after each backward pass");
    wait_layer(layer, "gradient_ready");  // the previous iteration may still be using the span
    leader_.ready(
        iter, [&](std::uint32_t u) { return plan_.policies.priority.key(table_.unit(u)); },
        [&](const auto& ready) { table_.hand_over(layer, grad, iter, ready); });
  }

  /// Blocks until the aggregate of layer `layer`'s latest gradient is in its span (returns at once
  /// if the layer was never handed over). Throws PeerError when that lasts Options::timeout,
  /// naming the rank to blame (schedule/watchdog.hpp has the exact bound).
  void wait_for(std::size_t layer) {
    check_layer(layer, "wait_for");
    const auto t0 = clock::now();
    wait_layer(layer, "wait_for");
    stats_.exposed_wait(clock::now() - t0);
  }

  /// Ends the iteration's backward pass: every layer must have been handed over. Does not block.
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

  /// Blocks until every handed-over layer is aggregated.
  void wait_all() {
    for (std::size_t l = 0; l < table_.layers(); ++l) wait_for(l);
  }

  /// Fails this synchronizer and tells every peer, whose next call (or current wait) then throws
  /// PeerError "rank R failed: <reason>": call it when this rank cannot go on (an exception in
  /// the training loop), before unwinding, so no peer waits for it. Idempotent.
  void abort(const std::string& reason) {
    watchdog_.fail(std::make_exception_ptr(PeerError("gradsync: " + user_.describe() + " stopped: " + reason)));
  }

  /// This iteration's training loss, before the backward pass, for a collective that adapts to
  /// it (collective::Runtime::report_loss); the others ignore it.
  void report_loss(float loss) { runtime_->report_loss(loss); }

  /// This rank's counters, with the collective's own (Statistics::counters).
  Statistics stats() const {
    Statistics s = stats_.snapshot();
    s.counters = runtime_->counters();
    return s;
  }

  // Checkpoints: what a resumed run needs to continue bit-identically, per rank. iteration():
  // iterations finished (stochastic codecs key their random numbers on it); state(): the rest,
  // empty when nothing. It holds residuals() — the error-feedback memory of a codec with
  // needs_residual() (onebit, topk, ef+...) or what a collective holds back (collective::holds_back),
  // every unit's back to back in units() order (bypassed ones keep none) — then what the
  // collective learned from the training (collective::Runtime::save_state), so a resumed run
  // continues as the interrupted one would have. Read them between iterations, after wait_all():
  // executors update both while units are in flight.
  std::int64_t iteration() const { return iteration_.load(); }
  std::span<const float> residuals() const { return table_.residuals(); }
  std::size_t state_size() const {
    return table_.residuals().size() + runtime_->state_size();
  }
  std::vector<float> state() const {
    std::vector<float> s(state_size());
    const std::span<float> out(s);
    std::ranges::copy(table_.residuals(), out.begin());
    runtime_->save_state(out.subspan(table_.residuals().size()));
    return s;
  }
  /// Puts a new synchronizer (same layout and policies, on every rank) where a saved one was:
  /// `state` as state() gave it. Call before the first gradient_ready; throws UsageError
  /// otherwise or when the state's size differs.
  void restore(std::int64_t iteration, std::span<const float> state) {
    if (iteration < 0) throw UsageError("gradsync: restore(): negative iteration " + std::to_string(iteration));
    if (state.size() != state_size())
      throw UsageError("gradsync: restore(): " + std::to_string(state.size()) + " values of state, but " +
                       describe() + " with these units keeps " + std::to_string(state_size()) +
                       "; restore state saved with the same model, slicing, priority, codec and collective");
    for (std::size_t l = 0; l < table_.layers(); ++l)
      if (table_.submitted(l) != -1)
        throw UsageError("gradsync: restore() after gradient_ready; restore a newly constructed synchronizer");
    const std::size_t residuals = table_.residuals().size();
    std::ranges::copy(state.first(residuals), table_.residuals().begin());
    runtime_->load_state(state.subspan(residuals));
    iteration_.store(iteration);
  }

  /// Why layer `layer`'s gradient may not be handed over in GPU memory with these policies; empty
  /// when it may. A codec that keeps units in device memory (codec::DeviceCodec: cuda::OnDevice)
  /// aggregates them there over the collectives that touch units only through it ('ring', 'ps',
  /// 'reduce-broadcast', 'hierarchical', 'hybrid'); the NCCL collectives take them over
  /// transport::Nccl. What would read the unit on the host is refused: an error-feedback residual
  /// (kept on the host), fusion (gathered on the host), a priority that reads units, and
  /// Options::check_finite unless the codec checks on the device.
  std::string device_refusal(std::size_t layer) const {
    check_layer(layer, "device_refusal");
    return plan_.device_refusal(layer);
  }

  const std::vector<Unit>& units() const { return table_.units(); }
  /// Whether unit u travels as fp32 instead of through the (lossy) codec: it carries only
  /// tensors under the codec's bypass threshold (codec/bypass.hpp).
  bool bypassed(std::size_t u) const { return table_.bypassed(static_cast<std::uint32_t>(u)); }
  const ModelLayout& layout() const { return plan_.layout; }
  /// "fixed:40000/forward/qsgd8:bucket=1024/ring": the policies with every knob that differs from
  /// its default, as the handshake compares them.
  std::string describe() const { return plan_.describe; }

 private:
  // ---- waiting and failure ----
  void wait_layer(std::size_t layer, const char* who) {
    const bool done = watchdog_.wait([&] { return table_.layer_done(layer); }, who, layer);
    rethrow_if_failed();
    if (!done)
      throw UsageError("gradsync: " + std::string(who) + "(" + std::to_string(layer) +
                       "): the synchronizer is being destroyed on another thread");
  }

  /// Throws this synchronizer's first error, if it failed, once no executor touches the caller's
  /// spans any more: the caller may free them as soon as a call throws.
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

  void check_layer(std::size_t layer, const char* who) const {
    if (layer >= table_.layers())
      throw UsageError("gradsync: " + std::string(who) + "(" + std::to_string(layer) + "): layer id out of range; the layout has " +
                       std::to_string(table_.layers()) + " layers (0.." + std::to_string(table_.layers() - 1) + ")");
  }
  /// A gradient in GPU memory: everything that would read it on the host is refused by name.
  void check_device_layer(std::size_t layer) const {
    if (const std::string why = device_refusal(layer); !why.empty())
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): layer '" + plan_.layout.layer(layer).name +
                       "' is in GPU memory, but " + why + "; or hand over a host copy");
  }

  transport::Transport& user_;  // the caller's transport: abort messages use it even after t_ is cancelled
  schedule::Plan<Slicing, Priority, Codec, Collective> plan_;  // settled before anything starts
  transport::Cancellable t_;    // every other message: one timeout, and waits that end on failure
  schedule::Control control_;
  StatisticsRecorder stats_;
  schedule::UnitTable table_;
  schedule::Leader leader_;
  std::unique_ptr<collective::Runtime> runtime_;  // what the collective keeps for this synchronizer
  schedule::Executors<Priority, Codec, Collective> executors_;
  schedule::Watchdog watchdog_;  // after what it watches: its thread stops before they go
  std::vector<std::thread> threads_;
  std::atomic<std::int64_t> iteration_{0};
};

}  // namespace gradsync
