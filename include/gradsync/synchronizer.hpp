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
/// A facade: the constructor settles a schedule::Plan (units, bypass, lane capacities, checks,
/// handshake text) and starts a schedule::Engine (schedule/engine.hpp says how a unit travels);
/// each call checks its input against the plan and forwards to the engine.
///
/// \tparam Slicing     how layers become units (slicing::FixedSlices, Fusion, WholeLayer, ...)
/// \tparam Priority    which ready unit goes first (priority::ForwardOrder, Fifo, ...)
/// \tparam Codec       how a unit is put on the wire (codec::Identity, Qsgd<8>, ...)
/// \tparam Collective  how a unit is aggregated (collective::Ring, ParameterServer, ...)
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "codec/concept.hpp"
#include "collective/concept.hpp"
#include "core/layout.hpp"
#include "core/options.hpp"
#include "core/statistics.hpp"
#include "priority/concept.hpp"
#include "schedule/checkpoint.hpp"
#include "schedule/engine.hpp"
#include "schedule/plan.hpp"
#include "slicing/concept.hpp"

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

  /// Checks the policies fit the layout and each other (ConfigError / UsageError), then shakes
  /// hands with every peer: layouts, policies with their knobs, and options must agree.
  Synchronizer(transport::Transport& transport, ModelLayout layout, Options options = {}, Policies policies = {})
      : plan_(std::move(layout), std::move(options), std::move(policies), transport.size()), engine_(transport, plan_) {}
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;
  /// Stops the threads after in-flight units finish (call wait_all() first to see their errors;
  /// gives up after Options::timeout). Destroyed in the middle of an iteration (some layers handed
  /// over, not all) or with units stuck in flight, it tells every peer this rank stopped, so they
  /// fail at once instead of waiting for it.
  ~Synchronizer() = default;

  /// Hands over layer `layer`'s gradient of this iteration. It blocks only while the previous
  /// iteration's units of this layer are still in flight (nobody called wait_for(layer) since its
  /// last hand-over): it waits for them as wait_for(layer) would, and throws PeerError when that
  /// lasts Options::timeout (schedule/watchdog.hpp has the exact bound). Otherwise it returns at
  /// once. `grad` must stay alive and untouched until wait_for(layer) returns: it is overwritten
  /// with the aggregate. GPU memory works as device_refusal(layer) says; the kernels that wrote it
  /// must have finished (synchronize their stream first): gradsync's streams do not wait for yours.
  void gradient_ready(std::size_t layer, std::span<float> grad) {
    plan_.check_gradient(layer, grad.size(), engine_.device_memory(grad.data()));
    engine_.hand_over(layer, grad);
  }

  /// Blocks until the aggregate of layer `layer`'s latest gradient is in its span (returns at once
  /// if the layer was never handed over). Throws PeerError when that lasts Options::timeout,
  /// naming the rank to blame (schedule/watchdog.hpp has the exact bound).
  void wait_for(std::size_t layer) {
    plan_.check_layer(layer, "wait_for");
    const auto t0 = clock::now();
    engine_.wait(layer, "wait_for");
    engine_.recorder().exposed_wait(clock::now() - t0);
  }

  /// Ends the iteration's backward pass: every layer must have been handed over. Does not block.
  void finish_iteration() { engine_.finish_iteration(); }

  /// Blocks until every handed-over layer is aggregated.
  void wait_all() {
    for (std::size_t l = 0; l < plan_.layout.num_layers(); ++l) wait_for(l);
  }

  /// Fails this synchronizer and tells every peer, whose next call (or current wait) then throws
  /// PeerError "rank R failed: <reason>": call it when this rank cannot go on (an exception in
  /// the training loop), before unwinding, so no peer waits for it. Idempotent.
  void abort(const std::string& reason) { engine_.abort(reason); }

  /// This iteration's training loss, before the backward pass, for a collective that adapts to
  /// it (collective::Runtime::report_loss); the others ignore it.
  void report_loss(float loss) { engine_.runtime().report_loss(loss); }

  /// This rank's counters, with the collective's own (Statistics::counters).
  Statistics stats() const { return engine_.stats(); }

  /// Checkpoints, per rank (schedule/checkpoint.hpp): iteration() counts the iterations finished
  /// (stochastic codecs key their random numbers on it); state() is the rest, empty when nothing.
  /// Read them between iterations, after wait_all(): executors update the state while units are in
  /// flight. restore() puts a new synchronizer (same layout and policies, on every rank) where a
  /// saved one was; call it before the first gradient_ready. It throws UsageError otherwise or when
  /// the state's size differs.
  std::int64_t iteration() const { return engine_.iteration(); }
  std::span<const float> residuals() const { return engine_.table().residuals(); }
  std::size_t state_size() const { return schedule::checkpoint::size(engine_.table(), engine_.runtime()); }
  std::vector<float> state() const { return schedule::checkpoint::save(engine_.table(), engine_.runtime()); }
  void restore(std::int64_t iteration, std::span<const float> state) {
    if (iteration < 0) throw UsageError("gradsync: restore(): negative iteration " + std::to_string(iteration));
    schedule::checkpoint::load(engine_.table(), engine_.runtime(), state, describe());
    engine_.resume_at(iteration);
  }

  /// Why layer `layer`'s gradient may not be handed over in GPU memory with these policies; empty
  /// when it may. A codec that keeps units in device memory (codec::DeviceCodec: cuda::OnDevice)
  /// aggregates them there over the collectives that touch units only through it ('ring', 'ps',
  /// 'reduce-broadcast', 'hierarchical', 'hybrid'); the NCCL collectives take them over
  /// transport::Nccl. What would read the unit on the host is refused: an error-feedback residual
  /// (kept on the host), fusion (gathered on the host), a priority that reads units, and
  /// Options::check_finite unless the codec checks on the device.
  std::string device_refusal(std::size_t layer) const {
    plan_.check_layer(layer, "device_refusal");
    return plan_.device_refusal(layer);
  }

  const std::vector<Unit>& units() const { return engine_.table().units(); }
  /// Whether unit u travels as fp32 instead of through the (lossy) codec: it carries only
  /// tensors under the codec's bypass threshold (codec/bypass.hpp).
  bool bypassed(std::size_t u) const { return engine_.table().bypassed(static_cast<std::uint32_t>(u)); }
  const ModelLayout& layout() const { return plan_.layout; }
  /// "fixed:40000/forward/qsgd8:bucket=1024/ring": the policies with every knob that differs from
  /// its default, as the handshake compares them.
  std::string describe() const { return plan_.describe; }

 private:
  schedule::Plan<Slicing, Priority, Codec, Collective> plan_;  // settled before anything starts
  schedule::Engine<Slicing, Priority, Codec, Collective> engine_;
};

}  // namespace gradsync
