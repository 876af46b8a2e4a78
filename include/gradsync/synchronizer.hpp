#pragma once
/// Synchronizer<Slicing, Priority, Codec, Collective>: the one type users hold.
///
/// \code
///   using Sync = gradsync::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                                       gs::codec::Identity, gs::collective::Ring>;
///   Sync sync{transport, layout};
///   for (step...) {
///     for (l in layers)           { sync.wait_for(l); optimizer.step(l); forward(l); }
///     for (l in reversed(layers)) { backward(l); sync.gradient_ready(l, grad(l)); }
///     sync.finish_iteration();
///   }
///   sync.wait_all();
/// \endcode
///
/// How it works. gradient_ready marks the layer's units; a unit whose layers are all in is ready.
/// Rank 0's communication thread takes the most urgent ready unit from the priority lanes while
/// the credit window allows, and tells every rank to run it next; each rank's executors run that
/// unit's collective as soon as the unit is ready locally too. Because every rank runs units in
/// rank 0's order, collectives that need all ranks at once (ring) cannot deadlock however
/// differently the ranks' backward passes are timed, and a more urgent unit overtakes everything
/// still queued at the next unit boundary. The aggregate is written back into the caller's span.
///
/// \tparam Slicing     how layers become units (slicing::FixedSlices, Fusion, WholeLayer, ...)
/// \tparam Priority    which ready unit goes first (priority::ForwardOrder, Fifo, ...)
/// \tparam Codec       how a unit is put on the wire (codec::Identity, ...)
/// \tparam Collective  how a unit is aggregated (collective::Ring, ParameterServer, ...)
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "codec/bypass.hpp"
#include "codec/concept.hpp"
#include "codec/identity.hpp"
#include "codec/traits.hpp"
#include "collective/concept.hpp"
#include "collective/server.hpp"
#include "core/handshake.hpp"
#include "core/layout.hpp"
#include "core/options.hpp"
#include "core/statistics.hpp"
#include "priority/concept.hpp"
#include "schedule/dispatch_queue.hpp"
#include "schedule/lanes.hpp"
#include "slicing/concept.hpp"
#include "transport/cancellable.hpp"

namespace gradsync {

template <class Slicing, class Priority, class Codec, class Collective>
class Synchronizer {
  GRADSYNC_CHECK_SLICING(Slicing);
  GRADSYNC_CHECK_PRIORITY(Priority);
  GRADSYNC_CHECK_CODEC(Codec);
  GRADSYNC_CHECK_COLLECTIVE(Collective);
  using clock = std::chrono::steady_clock;

 public:
  Synchronizer(transport::Transport& transport, ModelLayout layout, Options options = {}, Slicing slicing = {},
               Priority priority = {}, Codec codec = {}, Collective collective = {})
      : user_(transport), opt_(std::move(options)), t_(user_, opt_.timeout), layout_(std::move(layout)), slicing_(std::move(slicing)),
        priority_(std::move(priority)), codec_(std::move(codec)), collective_(std::move(collective)),
        units_(slicing_.plan(layout_)), lanes_(lane_capacities()), dispatch_(units_.size()),
        server_(t_, lane_capacities(), units_.size()) {
    if (opt_.inflight_units == 0) throw UsageError("gradsync: Options::inflight_units must be at least 1");
    if (units_.size() >= transport::reserved_tags) throw UsageError("gradsync: too many units; use larger slices");
    index_units();
    session_ = handshake(t_, hello());
    start_threads();
  }
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  /// Stops the threads after in-flight units finish (call wait_all() first to see their errors;
  /// gives up after Options::timeout). Destroyed in the middle of an iteration (some layers handed
  /// over, not all) or with units stuck in flight, it tells every peer this rank stopped, so they
  /// fail at once instead of waiting for it.
  ~Synchronizer() {
    const std::int64_t iter = iteration_.load();
    const auto handed = std::ranges::count_if(layers_, [&](const Layer& l) { return l.submitted.load() == iter; });
    if (handed > 0 && static_cast<std::size_t>(handed) < layers_.size())
      abort("its Synchronizer was destroyed in the middle of iteration " + std::to_string(iter) + " (" +
            std::to_string(handed) + " of " + std::to_string(layers_.size()) + " layers handed over)");
    {  // let in-flight units finish (peers need this rank for them), but never hang
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, opt_.timeout, [&] { return failed_.load() || all_done(); })) {
        lock.unlock();
        abort("its Synchronizer was destroyed with units still in flight after " + std::to_string(opt_.timeout.count()) +
              " ms");
      }
    }
    stop_threads();
    t_.cancel(std::make_exception_ptr(UsageError("gradsync: the synchronizer was destroyed")));  // ends polls now
    server_.stop();
    for (auto& th : threads_) th.join();
  }

  /// Fails this synchronizer and tells every peer, whose next call (or current wait) then throws
  /// PeerError "rank R failed: <reason>": call it when this rank cannot go on (an exception in
  /// the training loop), before unwinding, so no peer waits for it. Idempotent.
  void abort(const std::string& reason) {
    fail(std::make_exception_ptr(PeerError("gradsync: " + user_.describe() + " stopped: " + reason)), true);
  }

  /// Hands over layer `layer`'s gradient of this iteration; returns at once. `grad` must stay
  /// alive and untouched until wait_for(layer) returns: it is overwritten with the aggregate.
  /// GPU memory works with the NCCL collectives over transport::Nccl (whole or sliced units, a
  /// codec without residual, Options::check_finite off); the kernels that wrote it must have
  /// finished (synchronize their stream first): gradsync's NCCL streams do not wait for yours.
  void gradient_ready(std::size_t layer, std::span<float> grad) {
    rethrow_if_failed();
    check_layer(layer, "gradient_ready");
    if (grad.size() != layout_.layer(layer).elements)
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): span has " + std::to_string(grad.size()) +
                       " elements but layer '" + layout_.layer(layer).name + "' has " +
                       std::to_string(layout_.layer(layer).elements) + " in the ModelLayout");
    if (t_.device_memory(grad.data())) check_device_layer(layer);
    if (opt_.check_finite) check_finite(layer, grad);
    const std::int64_t iter = iteration_.load();
    if (layers_[layer].submitted.load() == iter)
      throw UsageError("gradsync: gradient_ready called twice for layer " + std::to_string(layer) + " ('" +
                       layout_.layer(layer).name + "') in iteration " + std::to_string(iter) +
                       "; call finish_iteration() after each backward pass");
    wait_layer(layer, "gradient_ready");  // the previous iteration may still be using the span
    Layer& l = layers_[layer];
    l.grad = grad;
    l.remaining.store(static_cast<int>(l.units.size()));
    l.submitted.store(iter);
    for (std::uint32_t u : l.units) {
      UnitState& s = state_[u];
      if (s.pending.fetch_sub(1) != 1) continue;
      s.pending.store(static_cast<int>(units_[u].segments.size()));
      s.ready_at = clock::now();
      s.ready_iteration.store(iter);
      if (leader()) lanes_.push(keys_[u], u);
      else notify();
    }
  }

  /// Blocks until the aggregate of layer `layer`'s latest gradient is in its span (returns at once
  /// if the layer was never handed over). Throws PeerError after Options::timeout.
  void wait_for(std::size_t layer) {
    check_layer(layer, "wait_for");
    const auto t0 = clock::now();
    wait_layer(layer, "wait_for");
    add_seconds(exposed_wait_ns_, clock::now() - t0);
  }

  /// Ends the iteration's backward pass: every layer must have been handed over. Does not block.
  void finish_iteration() {
    rethrow_if_failed();
    const std::int64_t iter = iteration_.load();
    std::string missing;
    for (std::size_t i = 0; i < layers_.size() && missing.size() < 200; ++i)
      if (layers_[i].submitted.load() != iter) missing += (missing.empty() ? "" : ", ") + layout_.layer(i).name;
    if (!missing.empty())
      throw UsageError("gradsync: finish_iteration(): no gradient_ready in iteration " + std::to_string(iter) +
                       " for layer(s) " + missing + "; every rank must hand over every layer each iteration");
    iteration_.store(iter + 1);
    iterations_.fetch_add(1);
  }

  /// Blocks until every handed-over layer is aggregated.
  void wait_all() {
    for (std::size_t l = 0; l < layers_.size(); ++l) wait_for(l);
  }

  /// True when layer `layer` has no unit in flight.
  bool done(std::size_t layer) const {
    check_layer(layer, "done");
    return layers_[layer].remaining.load() == 0;
  }

  Statistics stats() const {
    Statistics s;
    s.units = units_done_.load();
    s.bytes_sent = bytes_sent_.load();
    s.iterations = iterations_.load();
    s.queued_seconds = queued_ns_.load() * 1e-9;
    s.wire_seconds = wire_ns_.load() * 1e-9;
    s.exposed_wait_seconds = exposed_wait_ns_.load() * 1e-9;
    s.elements = elements_.load();
    s.elements_compressed = elements_compressed_.load();
    s.bytes_compressed = bytes_compressed_.load();
    return s;
  }
  // Checkpoints: what a resumed run needs to continue bit-identically, per rank. iteration():
  // iterations finished (stochastic codecs key their random numbers on it); residuals(): the
  // error-feedback memory of a codec with needs_residual() (onebit, topk, ef+...), every
  // compressed unit's back to back in units() order (bypassed ones keep none), empty otherwise. Read both between iterations, after
  // wait_all(): executors update the residuals while units are in flight.
  std::int64_t iteration() const { return iteration_.load(); }
  std::span<const float> residuals() const { return residual_; }
  /// Puts a new synchronizer (same layout and policies, on every rank) where a saved one was.
  /// Call before the first gradient_ready; throws UsageError otherwise or when the residuals'
  /// size differs.
  void restore(std::int64_t iteration, std::span<const float> residuals) {
    if (iteration < 0) throw UsageError("gradsync: restore(): negative iteration " + std::to_string(iteration));
    if (residuals.size() != residual_.size())
      throw UsageError("gradsync: restore(): " + std::to_string(residuals.size()) + " residual values, but codec '" +
                       std::string(codec_.name()) + "' with these units keeps " + std::to_string(residual_.size()) +
                       "; restore state saved with the same model, slicing and codec");
    if (!std::ranges::all_of(layers_, [](const Layer& l) { return l.submitted.load() == -1; }))
      throw UsageError("gradsync: restore() after gradient_ready; restore a newly constructed synchronizer");
    std::ranges::copy(residuals, residual_.begin());
    iteration_.store(iteration);
  }
  const std::vector<Unit>& units() const { return units_; }
  /// Whether unit u travels as fp32 instead of through the (lossy) codec: it carries only
  /// tensors under the codec's bypass threshold (codec/bypass.hpp).
  bool bypassed(std::size_t u) const { return bypassed_.at(u) != 0; }
  const ModelLayout& layout() const { return layout_; }
  /// "fixed:40000/forward/fp32/ring": the policies, as in the handshake.
  std::string describe() const {
    return slicing_.describe() + "/" + std::string(priority_.name()) + "/" + std::string(codec_.name()) + "/" +
           collective_text();
  }

 private:
  struct Layer {
    std::vector<std::uint32_t> units;  // units carrying part of this layer
    std::span<float> grad;
    std::atomic<std::int64_t> submitted{-1};  // iteration of the latest gradient_ready
    std::atomic<int> remaining{0};            // its units not yet aggregated
  };
  struct UnitState {
    std::atomic<int> pending{0};                    // layers still to hand over this iteration
    std::atomic<std::int64_t> ready_iteration{-1};  // iteration in which the unit became ready
    clock::time_point ready_at{};
    std::size_t residual_offset = 0;
  };
  struct Executor {
    collective::Workspace ws;
    std::vector<float> fused;  // gather buffer for fused units
  };

  bool leader() const { return t_.rank() == 0; }
  /// The collective with its knobs ("hierarchical:2") when it has a describe(), so the handshake
  /// catches ranks that differ in them.
  std::string collective_text() const {
    if constexpr (requires { collective_.describe(); }) return collective_.describe();
    else return std::string(collective_.name());
  }

  std::vector<std::size_t> lane_capacities() const {
    const std::size_t levels = priority_.levels(layout_);
    std::vector<std::size_t> cap(levels, 0);
    for (const Unit& u : units_) {
      const std::uint32_t k = priority_.key(u);
      if (k >= levels)
        throw UsageError("gradsync: priority '" + std::string(priority_.name()) + "' gave key " + std::to_string(k) +
                         " but declared only " + std::to_string(levels) + " levels");
      ++cap[k];
    }
    return cap;
  }

  void index_units() {
    layers_ = std::vector<Layer>(layout_.num_layers());
    state_ = std::vector<UnitState>(units_.size());
    bypassed_.assign(units_.size(), 0);
    std::vector<std::size_t> sizes;
    for (const LayerSpec& l : layout_.layers()) sizes.push_back(l.elements);
    // The study's rule is about tensors: a unit is bypassed when every tensor it carries is small.
    const std::size_t small = codec_.lossless() ? 0 : codec::bypass_threshold(sizes, codec::bypass_below(codec_));
    std::size_t residual = 0;
    std::vector<std::size_t> covered(layout_.num_layers(), 0);
    for (std::uint32_t u = 0; u < units_.size(); ++u) {
      keys_.push_back(priority_.key(units_[u]));
      max_elements_ = std::max(max_elements_, units_[u].elements);
      for (const Segment& s : units_[u].segments) {
        layers_.at(s.layer).units.push_back(u);
        covered[s.layer] += s.length;
      }
      bypassed_[u] = std::ranges::all_of(units_[u].segments, [&](const Segment& s) { return sizes[s.layer] < small; });
      state_[u].pending.store(static_cast<int>(units_[u].segments.size()));
      state_[u].residual_offset = residual;
      if (codec_.needs_residual() && !bypassed_[u]) residual += units_[u].elements;
    }
    for (std::size_t l = 0; l < covered.size(); ++l)
      if (covered[l] != layout_.layer(l).elements)
        throw UsageError("gradsync: slicing '" + slicing_.describe() + "' covers " + std::to_string(covered[l]) +
                         " of the " + std::to_string(layout_.layer(l).elements) + " elements of layer " + std::to_string(l));
    residual_.assign(residual, 0.0f);
  }

  HandshakeInfo hello() const {
    HandshakeInfo h;
    h.layout_signature = layout_.signature();
    h.world = t_.size();
    h.layers = static_cast<std::uint32_t>(layout_.num_layers());
    const std::string p = describe() + "/" + (opt_.average ? "mean" : "sum") + "/inflight=" +
                          std::to_string(opt_.inflight_units) + "/seed=" + std::to_string(opt_.seed);
    std::strncpy(h.policies, p.c_str(), sizeof h.policies - 1);
    return h;
  }

  void start_threads() {
    executors_.resize(opt_.inflight_units);
    // Warm the scratch buffers for the largest unit (detail::Wire grows them if a message needs more).
    const std::size_t bytes = std::max(codec_.encoded_bytes(max_elements_), codec::Identity{}.encoded_bytes(max_elements_));
    for (auto& e : executors_) {
      e.ws.send.resize(bytes);
      e.ws.recv.resize(bytes);
      e.fused.resize(max_elements_);
    }
    threads_.emplace_back([this] { guarded([this] { leader() ? lead() : follow(); }); });
    for (auto& e : executors_) threads_.emplace_back([this, &e] { guarded([this, &e] { execute(e); }); });
    if (t_.size() > 1) threads_.emplace_back([this] { guarded([this] { watch(); }); });
  }

  // ---- communication thread ----
  void lead() {
    const std::size_t credit = opt_.credit_bytes;
    while (!stop_.load()) {
      {  // wait for room in the window before choosing, so the choice is as late as possible
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping() || (inflight_units_ < opt_.inflight_units && inflight_bytes_ < credit); });
      }
      const std::uint64_t seen = lanes_.pushes();
      const auto u = lanes_.try_pop();
      if (!u) {
        if (!stopping()) lanes_.wait_for_push(seen);
        continue;
      }
      const std::size_t bytes = units_[*u].elements * sizeof(float);
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping() || inflight_units_ == 0 || inflight_bytes_ + bytes <= credit; });
        ++inflight_units_;
        inflight_bytes_ += bytes;
      }
      const schedule::Decision d{state_[*u].ready_iteration.load(), *u};
      for (int r = 1; r < t_.size(); ++r) t_.send(r, transport::schedule_tag, std::as_bytes(std::span(&d, 1)));
      dispatch_.push(d);
    }
  }

  void follow() {
    while (!stop_.load()) {
      schedule::Decision d;
      const auto got = t_.recv_for(0, transport::schedule_tag, std::as_writable_bytes(std::span(&d, 1)),
                                   std::chrono::milliseconds(50));
      if (!got) continue;
      if (*got != sizeof d || d.unit >= units_.size())
        throw PeerError("gradsync: " + t_.describe() + " got a malformed schedule message from rank 0");
      dispatch_.push(d);
    }
  }

  // ---- executors ----
  void execute(Executor& e) {
    std::uint64_t sequence = 0;
    while (auto d = dispatch_.pop(&sequence)) {
      UnitState& s = state_[d->unit];
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping() || s.ready_iteration.load() >= d->iteration; });
      }
      if (stopping()) return;
      if (s.ready_iteration.load() != d->iteration)
        throw PeerError("gradsync: " + t_.describe() + " is at iteration " + std::to_string(s.ready_iteration.load()) +
                        " for unit " + std::to_string(d->unit) + " but rank 0 scheduled iteration " +
                        std::to_string(d->iteration) + ": ranks must call finish_iteration() in step");
      run_unit(e, d->unit, d->iteration, sequence);
    }
  }

  void run_unit(Executor& e, std::uint32_t u, std::int64_t iter, std::uint64_t sequence) {
    const Unit& unit = units_[u];
    UnitState& s = state_[u];
    const auto started = clock::now();
    std::span<float> data = unit.fused() ? std::span(e.fused).first(unit.elements) : segment_span(unit.segments[0]);
    if (unit.fused()) {
      std::size_t off = 0;
      for (const Segment& g : unit.segments) off = std::ranges::copy(segment_span(g), data.begin() + off).out - data.begin();
    }
    codec::EncodeContext ctx{.seed = opt_.seed, .iteration = static_cast<std::uint64_t>(iter), .unit = u};
    const bool bypass = bypassed_[u] != 0;
    if (codec_.needs_residual() && !bypass) ctx.residual = std::span(residual_).subspan(s.residual_offset, unit.elements);
    collective::Job job{data, u, ctx, opt_.average, sequence, keys_[u], &server_};
    const std::size_t sent =
        bypass ? collective_.run(t_, codec::Identity{}, job, e.ws) : collective_.run(t_, codec_, job, e.ws);
    if (unit.fused()) {
      std::size_t off = 0;
      for (const Segment& g : unit.segments) {
        std::ranges::copy(data.subspan(off, g.length), segment_span(g).begin());
        off += g.length;
      }
    }
    const auto finished = clock::now();
    bytes_sent_.fetch_add(sent);
    units_done_.fetch_add(1);
    elements_.fetch_add(unit.elements);
    if (!bypass && !codec_.lossless()) {
      elements_compressed_.fetch_add(unit.elements);
      bytes_compressed_.fetch_add(sent);
    }
    add_seconds(queued_ns_, started - s.ready_at);
    add_seconds(wire_ns_, finished - started);
    if (opt_.on_unit) opt_.on_unit({u, iter, unit.elements, sent, s.ready_at, started, finished});
    {
      std::lock_guard lock(mutex_);
      for (const Segment& g : unit.segments) layers_[g.layer].remaining.fetch_sub(1);
      if (leader()) {
        --inflight_units_;
        inflight_bytes_ -= unit.elements * sizeof(float);
      }
    }
    cv_.notify_all();
  }

  std::span<float> segment_span(const Segment& g) const { return layers_[g.layer].grad.subspan(g.offset, g.length); }

  // ---- waiting and failure ----
  void wait_layer(std::size_t layer, const char* who) {
    std::unique_lock lock(mutex_);
    auto settled = [&] { return failed_.load() || layers_[layer].remaining.load() == 0; };
    // An executor stuck on a silent peer gives up within the same timeout and names the peer:
    // allow it a moment to, before the vaguer message below.
    const bool ok = cv_.wait_for(lock, opt_.timeout, settled) ||
                    cv_.wait_for(lock, std::min<std::chrono::milliseconds>(opt_.timeout, std::chrono::seconds(1)), settled);
    lock.unlock();
    rethrow_if_failed();
    if (!ok)
      throw PeerError("gradsync: " + std::string(who) + "(" + std::to_string(layer) + "): layer '" +
                      layout_.layer(layer).name + "' not aggregated after " + std::to_string(opt_.timeout.count()) +
                      " ms on " + t_.describe() + ": a peer rank died or did not hand over this layer; raise "
                      "Options::timeout if a peer is only slow");
  }

  template <class F>
  void guarded(F&& body) {
    try {
      body();
    } catch (...) {
      if (!stopping()) fail(std::current_exception(), true);  // else: the shutdown's own cancellation
    }
  }
  /// Records the first error, tells the peers when it is this rank's own (`tell`: not one a peer
  /// reported), and ends every wait of this synchronizer's threads and callers with it.
  void fail(std::exception_ptr error, bool tell) {
    {
      std::lock_guard lock(mutex_);
      if (error_) return;
      error_ = error;
      failed_.store(true);
    }
    if (tell) tell_peers(error);
    t_.cancel(error);
    stop_threads();
  }
  /// Sends every peer this rank's error (best effort: a peer may be gone already).
  void tell_peers(std::exception_ptr error) {
    std::string text = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
    }
    AbortMessage m{session_, {}};
    text.copy(m.text, sizeof m.text);
    const auto bytes = std::as_bytes(std::span(&m, 1)).first(sizeof m.session + std::min(text.size(), sizeof m.text));
    for (int p = 0; p < user_.size(); ++p) {
      if (p == user_.rank()) continue;
      try {
        user_.send(p, transport::abort_tag, bytes);
      } catch (...) {
      }
    }
  }
  /// The watcher thread: a peer's abort message fails this rank with the peer's own words.
  void watch() {
    AbortMessage m;
    while (!stopping()) {
      for (int p = 0; p < user_.size(); ++p) {
        if (p == user_.rank()) continue;
        const auto got = user_.try_recv(p, transport::abort_tag, std::as_writable_bytes(std::span(&m, 1)));
        if (!got || *got < sizeof m.session || m.session != session_) continue;  // none, or a stale one
        fail(std::make_exception_ptr(PeerError("gradsync: rank " + std::to_string(p) + " failed: " +
                                               std::string(m.text, *got - sizeof m.session))),
             false);
        return;
      }
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, transport::Cancellable::slice, [&] { return stopping(); });
    }
  }
  void stop_threads() {
    stop_.store(true);
    lanes_.wake();
    dispatch_.close();
    server_.request_stop();  // wakes executors waiting on it
    notify();
  }
  bool all_done() const {
    return std::ranges::all_of(layers_, [](const Layer& l) { return l.remaining.load() == 0; });
  }
  bool stopping() const { return stop_.load(); }
  void notify() {
    { std::lock_guard lock(mutex_); }
    cv_.notify_all();
  }
  void rethrow_if_failed() const {
    if (!failed_.load()) return;
    std::lock_guard lock(mutex_);
    std::rethrow_exception(error_);
  }
  void check_layer(std::size_t layer, const char* who) const {
    if (layer >= layers_.size())
      throw UsageError("gradsync: " + std::string(who) + "(" + std::to_string(layer) + "): layer id out of range; the layout has " +
                       std::to_string(layers_.size()) + " layers (0.." + std::to_string(layers_.size() - 1) + ")");
  }
  /// A gradient in GPU memory: everything that would read it on the host is refused by name.
  void check_device_layer(std::size_t layer) const {
    auto refuse = [&](const std::string& why) {
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): layer '" + layout_.layer(layer).name +
                       "' is in GPU memory, but " + why + "; or hand over a host copy");
    };
    if (!collective::accepts_device_memory(collective_))
      refuse("collective '" + collective_text() + "' reads units on the host: use 'nccl' or 'nccl-hierarchical'");
    if (opt_.check_finite) refuse("Options::check_finite reads it on the host: set it to false");
    if (codec_.needs_residual())
      refuse("codec '" + std::string(codec_.name()) + "' keeps its error-feedback residual on the host: use one without");
    for (std::uint32_t u : layers_[layer].units)
      if (units_[u].fused()) refuse("slicing '" + slicing_.describe() + "' fuses it with other layers on the host: use 'whole' or 'fixed'");
  }
  void check_finite(std::size_t layer, std::span<const float> grad) const {
    // Exponent all ones means Inf or NaN; OR-ing a flag keeps the loop branch-free and vectorized.
    bool bad = false;
    for (float x : grad) bad |= (std::bit_cast<std::uint32_t>(x) & 0x7f800000u) == 0x7f800000u;
    if (!bad) return;
    const auto at = std::ranges::find_if(grad, [](float x) { return !std::isfinite(x); }) - grad.begin();
    throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): layer '" + layout_.layer(layer).name +
                     "' has a non-finite gradient (element " + std::to_string(at) + " is " + std::to_string(grad[at]) +
                     "); lower the learning rate, clip gradients, or use loss scaling with Options::check_finite = false");
  }
  static void add_seconds(std::atomic<std::int64_t>& acc, clock::duration d) {
    acc.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  /// What a failing rank sends each peer: the session (core/handshake.hpp) and its error's text.
  struct AbortMessage {
    std::uint64_t session = 0;
    char text[1000];
  };

  transport::Transport& user_;  // the caller's transport: abort messages use it even after t_ is cancelled
  Options opt_;
  transport::Cancellable t_;    // every other message: one timeout, and waits that end on failure
  ModelLayout layout_;
  Slicing slicing_;
  Priority priority_;
  Codec codec_;
  Collective collective_;
  std::vector<Unit> units_;
  std::vector<std::uint32_t> keys_;
  std::size_t max_elements_ = 0;
  std::vector<Layer> layers_;
  std::vector<UnitState> state_;
  std::vector<char> bypassed_;   // per unit: goes as fp32 (only small tensors)
  std::vector<float> residual_;  // error-feedback memory, per unit, when the codec needs one
  schedule::PriorityLanes lanes_;
  schedule::DispatchQueue dispatch_;
  collective::Server server_;  // the parameter server's thread, started when a collective needs it
  std::vector<Executor> executors_;
  std::vector<std::thread> threads_;

  mutable std::mutex mutex_;  // guards the window counters and every wait below
  std::condition_variable cv_;
  std::size_t inflight_units_ = 0, inflight_bytes_ = 0;  // leader's window
  std::atomic<std::int64_t> iteration_{0};
  std::uint64_t session_ = 0;
  std::atomic<bool> stop_{false}, failed_{false};
  std::exception_ptr error_;

  std::atomic<std::uint64_t> units_done_{0}, bytes_sent_{0}, iterations_{0};
  std::atomic<std::uint64_t> elements_{0}, elements_compressed_{0}, bytes_compressed_{0};
  std::atomic<std::int64_t> queued_ns_{0}, wire_ns_{0}, exposed_wait_ns_{0};
};

}  // namespace gradsync
