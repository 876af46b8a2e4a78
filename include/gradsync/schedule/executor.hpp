#pragma once
/// Executors: the threads that run units' collectives, Options::inflight_units of them. Each takes
/// the next decision in rank 0's order from the Leader (choosing it, on rank 0), waits until the
/// unit is ready on this rank too, and runs it: fused units are gathered into a buffer of the executor's and scattered back,
/// the collective runs with the codec (or as fp32 for a unit of only small tensors, codec/bypass.hpp)
/// and the unit's error-feedback residual, and the aggregate lands in the caller's spans.
///
/// \code
///   schedule::Executors<Priority, Codec, Collective> executors(
///       {transport, priority, codec, collective, state, layout, table, leader, control, stats, options});
///   std::thread th([&] { executors.run(executors.slot(0)); });
/// \endcode
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../codec/identity.hpp"
#include "../codec/memory.hpp"
#include "../collective/concept.hpp"
#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../core/options.hpp"
#include "../core/statistics.hpp"
#include "../priority/concept.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"
#include "leader.hpp"
#include "units.hpp"

namespace gradsync::schedule {

template <class Priority, class Codec, class Collective>
class Executors {
 public:
  /// What the executors work with; all owned by the Synchronizer.
  struct Parts {
    transport::Transport& t;
    Priority& priority;
    const Codec& codec;
    const Collective& collective;
    /// What the collective keeps for this synchronizer (collective::start).
    collective::state_t<Collective>& state;
    const ModelLayout& layout;
    UnitTable& table;
    Leader& leader;
    Control& control;
    StatisticsRecorder& stats;
    const Options& options;
  };
  /// One executor's scratch: the collective's buffers and the gather buffer of fused units.
  struct Slot {
    collective::Workspace ws;
    std::vector<float> fused;
  };

  explicit Executors(Parts parts) : p_(parts), slots_(parts.options.inflight_units) {
    if (slots_.empty())
      throw UsageError("gradsync: Executors need settled options (Options::inflight_units 0 is the library's choice: "
                       "gradsync::settled(options, ranks) makes it)");
    // Warm the buffers for the largest unit (detail::Wire grows them if a message needs more).
    const std::size_t n = p_.table.max_elements();
    const std::size_t bytes = std::max(p_.codec.encoded_bytes(n), codec::Identity{}.encoded_bytes(n));
    for (Slot& s : slots_) {
      s.ws.send.resize(bytes);
      s.ws.recv.resize(bytes);
      s.fused.resize(n);
    }
  }

  std::size_t size() const { return slots_.size(); }
  /// No executor is inside a unit (none touches the caller's spans).
  bool idle() const { return busy_.load() == 0; }
  Slot& slot(std::size_t i) { return slots_[i]; }

  /// An executor thread's body, until the synchronizer stops.
  void run(Slot& slot) {
    std::uint64_t sequence = 0;
    while (auto d = p_.leader.next(sequence)) {
      if (!p_.control.wait([&] { return p_.table.ready_iteration(d->unit) >= d->iteration; })) return;
      if (p_.table.ready_iteration(d->unit) != d->iteration)
        throw PeerError("gradsync: " + p_.t.describe() + " is at iteration " +
                        std::to_string(p_.table.ready_iteration(d->unit)) + " for unit " + std::to_string(d->unit) +
                        " but rank 0 scheduled iteration " + std::to_string(d->iteration) +
                        ": ranks must call finish_iteration() in step");
      p_.control.change([&] { ++busy_; });
      try {
        run_unit(slot, *d, sequence);
      } catch (...) {
        p_.control.update([&] { --busy_; });
        throw;
      }
      // The layer's count, the window's credit and the executor's state change together; the
      // caller is woken only when a layer is done.
      p_.control.update_caller([&] {
        p_.leader.finished(d->unit);
        --busy_;
        return p_.table.complete(d->unit);
      });
    }
  }

 private:
  using clock = std::chrono::steady_clock;

  void run_unit(Slot& slot, const Decision& d, std::uint64_t sequence) {
    const std::uint32_t u = d.unit;
    const std::int64_t iteration = d.iteration;
    const Unit& unit = p_.table.unit(u);
    const auto started = clock::now();
    std::span<float> data = unit.fused() ? std::span(slot.fused).first(unit.elements) : p_.table.span(unit.segments[0]);
    if (unit.fused()) {
      std::size_t off = 0;
      for (const Segment& g : unit.segments) off = std::ranges::copy(p_.table.span(g), data.begin() + off).out - data.begin();
    }
    if (p_.options.check_finite) check_finite(unit, data, iteration);
    const bool fp32 = p_.table.bypassed(u);
    const codec::EncodeContext ctx{
        .seed = p_.options.seed, .iteration = static_cast<std::uint64_t>(iteration), .unit = u, .residual = p_.table.residual(u)};
    collective::Job job{data, u, ctx, p_.options.average, sequence, d.key};
    const std::size_t sent = fp32 ? collective::run(p_.collective, p_.t, codec::fp32_of(p_.codec), job, slot.ws, p_.state)
                                   : collective::run(p_.collective, p_.t, p_.codec, job, slot.ws, p_.state);
    if (unit.fused()) {
      std::size_t off = 0;
      for (const Segment& g : unit.segments) {
        std::ranges::copy(data.subspan(off, g.length), p_.table.span(g).begin());
        off += g.length;
      }
    }
    const auto finished = clock::now(), ready = p_.table.ready_at(u);
    p_.stats.unit(unit.elements, sent, !fp32 && !p_.codec.traits().lossless, started - ready, finished - started);
    if (p_.options.on_unit)
      p_.options.on_unit({u, iteration, unit.elements, sent, ready, started, finished, p_.state.counters(u)});
  }

  /// Options::check_finite: a NaN or Inf in this rank's gradient fails every rank before any of it
  /// is sent. Checked here, on the unit the collective is about to read (in cache then), rather
  /// than in gradient_ready: that was a pass of its own over the whole model on the training thread.
  void check_finite(const Unit& unit, std::span<const float> data, std::int64_t iteration) const {
    const auto bad = codec::first_non_finite(p_.codec, data);  // on the device for a device codec's memory
    if (!bad) return;
    std::size_t before = 0;  // elements of the unit's earlier segments (a fused unit carries several layers)
    const Segment* at = &unit.segments.front();
    for (const Segment& g : unit.segments) {
      at = &g;
      if (bad->index < before + g.length) break;
      before += g.length;
    }
    throw UsageError("gradsync: layer '" + p_.layout.layer(at->layer).name + "' has a non-finite gradient (element " +
                     std::to_string(at->offset + bad->index - before) + " is " + std::to_string(bad->value) +
                     ") in iteration " + std::to_string(iteration) +
                     "; lower the learning rate, clip gradients, or use loss scaling with Options::check_finite = false");
  }

  Parts p_;
  std::deque<Slot> slots_;  // stable addresses: each thread holds its own
  std::atomic<int> busy_{0};  // executors inside run_unit (changed under the control's lock)
};

}  // namespace gradsync::schedule
