#pragma once
/// simulate(): a discrete-event model of data-parallel training iterations, driven by the same
/// Slicing and Priority policy types the Synchronizer uses.
///
/// The model (one representative rank: every rank runs the same profile, so they are symmetric):
///  - Compute is one stream. Forward of layer 0..L-1, then backward L-1..0. The forward of layer
///    l in iteration i+1 first waits until every unit carrying one of l's tensors in iteration i
///    is aggregated (Synchronizer::wait_for: P3's overlap of communication with the next forward).
///  - At the end of layer l's backward its tensors' gradients are handed over; a unit (from the
///    real Slicing's plan of Profile::layout()) is ready once all the tensors it carries are, and
///    enters the ready queue under the real Priority's key (lowest first, FIFO within a key).
///  - The credit window of schedule/leader.hpp: while fewer than `inflight_units` units and
///    `credit_bytes` of fp32 are in flight, the most urgent ready unit is chosen; it starts once
///    its bytes fit (or nothing else is in flight).
///  - A started unit runs its collective's stages (collective_model.hpp). A stage waits until
///    every resource it uses is idle; idle resources go to the waiting stages in priority order
///    (key, then start order), non-preemptively: P3's priority queues at the sender and server.
///    A barrier stage waits until every unit of the unit's first tensor has reached it (the
///    window must then hold every unit).
///  - Decisions at time t are taken after every event of time t (a gradient handed over at the
///    instant a link frees is seen by the choice that link's next transfer makes).
///  - Rank skew, when the profile carries measured per-iteration compute (`iteration_seconds`):
///    in each iteration every rank draws its pace, a sample over the samples' median, and the
///    iteration's layers take the slowest rank's pace. That is exact for this model, not an
///    approximation: a unit is ready when it is ready on every rank, every rank's forward waits
///    for the same aggregated units, and a rank that is slower by a constant factor is then never
///    ahead of a faster one at any layer, so the slowest rank is the last everywhere. Ranks are
///    drawn independently: N ranks' slowest pace grows with N (a straggler at scale).
///
/// Invariants: the units of one iteration are all aggregated before the next iteration's
/// backward (the forward waits for them), so a unit is in flight at most once at a time; every
/// unit of every iteration completes (the run ends when the last one has).
///
/// Output: per-iteration times (start of one forward to the start of the next, the last one to
/// the moment its successor could start), per-unit events, every resource use (the transfers),
/// the compute spans, and each resource's busy share.
///
/// \code
///   namespace sim = gradsync::sim;
///   sim::Profile profile = sim::builtin_profile("resnet50", {});
///   auto net = sim::Network::from(gradsync::transport::Link::parse("10gbit"), 64);
///   auto r = sim::simulate(profile, gradsync::slicing::FixedSlices{40'000}, gradsync::priority::ForwardOrder{},
///                          sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net,
///                          {.iterations = 10});
///   r.steady_iteration_seconds();
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <gradsync/core/options.hpp>
#include <gradsync/priority/concept.hpp>
#include <gradsync/slicing/concept.hpp>
#include "codec_model.hpp"
#include "collective_model.hpp"
#include "median.hpp"
#include "network.hpp"
#include "profile.hpp"

namespace gradsync::sim {

struct Options {
  std::size_t iterations = 10;
  /// Units whose collectives may be in flight at once (gradsync::Options::inflight_units).
  std::size_t inflight_units = gradsync::Options{}.inflight_units;
  /// fp32 bytes of units in flight at once (gradsync::Options::credit_bytes).
  std::size_t credit_bytes = gradsync::Options{}.credit_bytes;
  /// Keep the per-unit, per-transfer and compute events (off: only times and utilization).
  bool record = true;
  /// Draw each rank's pace per iteration from the profile's measured iteration_seconds (above);
  /// off, or a profile without them: every rank runs the layers' times every iteration.
  bool rank_skew = true;
  std::uint64_t seed = 1;  ///< of the rank-skew draws: equal seeds, equal runs
};

struct ComputeEvent {
  std::uint32_t iteration = 0, layer = 0;
  bool backward = false;
  double start = 0, end = 0;
};
struct UnitEvent {
  std::uint32_t iteration = 0, unit = 0;
  double ready = 0, started = 0, done = 0;  ///< gradient ready, chosen by the window, aggregated
};
struct TransferEvent {  ///< one resource held by one stage of one unit
  std::uint32_t iteration = 0, unit = 0, stage = 0;
  Resource resource = Resource::tx;
  std::uint32_t shard = 0;
  double start = 0, end = 0;
};
struct ResourceUse {
  std::string_view name;
  std::size_t instances = 0;  ///< of this kind that held anything (shards)
  double busy_seconds = 0;    ///< summed over instances
  double mean = 0, max = 0;   ///< busy share of the run, over those instances
};

struct Result {
  std::vector<double> iteration_start;    ///< iterations + 1 entries (the last: when the next could start)
  std::vector<double> iteration_seconds;  ///< iterations entries
  double makespan = 0;                    ///< the last unit aggregated (or the last compute, if later)
  double compute_busy = 0;                ///< seconds the compute stream ran
  std::vector<ResourceUse> resources;     ///< one entry per Resource kind that was used
  std::vector<Unit> units;                ///< the real Slicing's plan
  std::vector<std::uint32_t> keys;        ///< the real Priority's key of each unit
  std::vector<Stage> stages;              ///< every unit's stages, unit u's from stage_offset[u]
  std::vector<std::size_t> stage_offset;  ///< units + 1 entries
  std::vector<ComputeEvent> compute;      ///< (Options::record)
  std::vector<UnitEvent> unit_events;     ///< in completion order (Options::record)
  std::vector<TransferEvent> transfers;   ///< in start order (Options::record)

  /// Mean iteration time after the first (which starts without waiting); the only one if just one.
  double steady_iteration_seconds() const {
    if (iteration_seconds.size() < 2) return iteration_seconds.empty() ? 0 : iteration_seconds[0];
    double s = 0;
    for (std::size_t i = 1; i < iteration_seconds.size(); ++i) s += iteration_seconds[i];
    return s / double(iteration_seconds.size() - 1);
  }
  /// Seconds the busiest link direction is held per iteration (tx, rx, up, down, server tx/rx).
  double wire_seconds_per_iteration() const {
    double worst = 0;
    for (const ResourceUse& r : resources)
      if (r.name != "server") worst = std::max(worst, r.busy_seconds / double(std::max<std::size_t>(r.instances, 1)));
    return iteration_seconds.empty() ? 0 : worst / double(iteration_seconds.size());
  }
};

namespace detail {

/// The event engine, on a fixed plan (units, keys, stages); simulate() builds the plan.
class Engine {
 public:
  Engine(const Profile& profile, Result& r, const Network& net, const Options& opt)
      : profile_(profile), r_(r), opt_(opt), shards_(std::size_t(std::max(net.ranks, net.dedicated_servers))) {
    const auto owners = profile.tensor_owners();
    const std::size_t n = r.units.size();
    segments_left_.resize(n);
    unit_layers_offset_.push_back(0);
    tensor_units_.resize(owners.size());
    layer_pending_.assign(profile.layers.size(), 0);
    barrier_size_.assign(owners.size(), 0);
    barrier_parked_.resize(owners.size());
    for (std::uint32_t u = 0; u < n; ++u) ++barrier_size_[barrier_of(u)];
    for (std::uint32_t u = 0; u < n; ++u) {
      segments_left_[u] = r.units[u].segments.size();
      std::vector<std::uint32_t> layers;
      for (const Segment& s : r.units[u].segments) {
        tensor_units_.at(s.layer).push_back(u);
        layers.push_back(owners[s.layer]);
      }
      std::sort(layers.begin(), layers.end());
      layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
      unit_layers_.insert(unit_layers_.end(), layers.begin(), layers.end());
      unit_layers_offset_.push_back(unit_layers_.size());
    }
    tensor_offset_.push_back(0);
    for (const ComputeLayer& l : profile.layers) tensor_offset_.push_back(tensor_offset_.back() + l.tensors.size());
    state_.resize(n);
    busy_.assign(2 + (resource_kinds - 2) * shards_, 0);
    held_.assign(busy_.size(), 0.0);
    if (opt.rank_skew && !profile.iteration_seconds.empty()) {
      pace_samples_ = profile.iteration_seconds;
      const double median = sim::median(pace_samples_);
      for (double& x : pace_samples_) x /= median;
      workers_ = std::size_t(net.ranks);
    }
    draw_pace();
  }

  void run() {
    decide(0);
    while (!events_.empty()) {
      const double t = events_.top().time;
      while (!events_.empty() && events_.top().time == t) {
        const Event e = events_.top();
        events_.pop();
        apply(e, t);
      }
      decide(t);
    }
    if (iteration_ <= opt_.iterations || inflight_units_ > 0 || !ready_.empty())
      throw UsageError("gradsync: the simulation stalled at iteration " + std::to_string(iteration_) +
                       " (a bug in gradsync::sim; please report the profile and policies)");
    finish();
  }

 private:
  enum class Kind : std::uint8_t { compute_done, release, stage_done };
  struct Event {
    double time;
    std::uint64_t seq;  // FIFO among equal times: deterministic runs
    Kind kind;
    std::uint32_t a;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct UnitState {
    std::uint32_t iteration = 0, stage = 0;
    std::uint64_t order = 0;  // start order: ties between equal keys at a resource
    double ready = 0, started = 0;
  };
  struct Ready {
    std::uint32_t key;
    std::uint64_t seq;
    std::uint32_t unit;
    bool operator>(const Ready& o) const { return key != o.key ? key > o.key : seq > o.seq; }
  };

  void push(double t, Kind k, std::uint32_t a) { events_.push(Event{t, seq_++, k, a}); }

  std::size_t index(const Use& u) const {
    const auto kind = static_cast<std::size_t>(u.resource);
    return kind < 2 ? kind : 2 + (kind - 2) * shards_ + u.shard;
  }
  const Stage& stage_of(std::uint32_t u) const { return r_.stages[r_.stage_offset[u] + state_[u].stage]; }
  std::size_t fp32_bytes(std::uint32_t u) const { return r_.units[u].elements * sizeof(float); }

  void apply(const Event& e, double t) {
    switch (e.kind) {
      case Kind::compute_done: compute_done(t); break;
      case Kind::release: busy_[e.a] = 0; break;
      case Kind::stage_done:
        ++state_[e.a].stage;
        begin_stage(e.a, t);
        break;
    }
  }

  // Compute last: a unit without stages (one rank) completes inside dispatch, and the forward
  // waiting for it must see that at once (nothing else would wake it).
  void decide(double t) {
    dispatch(t);
    grant(t);
    advance_compute(t);
  }

  // ---- compute ----
  void advance_compute(double t) {
    if (computing_ || iteration_ > opt_.iterations) return;
    const auto l = static_cast<std::uint32_t>(layer_);
    if (!backward_) {
      if (iteration_ > 0 && layer_pending_[l] > 0) return;  // wait_for(l)
      if (l == 0) r_.iteration_start.push_back(t);
      if (iteration_ == opt_.iterations) {  // only the start of the iteration after the last
        ++iteration_;
        return;
      }
    }
    const ComputeLayer& layer = profile_.layers[l];
    computing_ = true;
    compute_start_ = t;
    push(t + pace_ * (backward_ ? layer.backward_seconds : layer.forward_seconds), Kind::compute_done, 0);
  }
  /// This iteration's pace: the slowest of the ranks' draws (1 without skew).
  void draw_pace() {
    if (pace_samples_.empty()) return;
    pace_ = 0;
    for (std::size_t r = 0; r < workers_; ++r) pace_ = std::max(pace_, pace_samples_[rng_() % pace_samples_.size()]);
  }

  void compute_done(double t) {
    computing_ = false;
    r_.compute_busy += t - compute_start_;
    const auto l = static_cast<std::uint32_t>(layer_);
    if (opt_.record) r_.compute.push_back({std::uint32_t(iteration_), l, backward_, compute_start_, t});
    compute_end_ = t;
    const auto last = static_cast<std::ptrdiff_t>(profile_.layers.size()) - 1;
    if (!backward_) {
      if (layer_ == last) backward_ = true;
      else ++layer_;
      return;
    }
    for (std::size_t tensor = tensor_offset_[l]; tensor < tensor_offset_[l + 1]; ++tensor)
      for (std::uint32_t u : tensor_units_[tensor])
        if (--segments_left_[u] == 0) make_ready(u, t);
    if (layer_ > 0) {
      --layer_;
      return;
    }
    backward_ = false;
    ++iteration_;
    draw_pace();
  }

  void make_ready(std::uint32_t u, double t) {
    segments_left_[u] = r_.units[u].segments.size();
    state_[u].iteration = std::uint32_t(iteration_);
    state_[u].ready = t;
    for (std::size_t i = unit_layers_offset_[u]; i < unit_layers_offset_[u + 1]; ++i) ++layer_pending_[unit_layers_[i]];
    ready_.push(Ready{r_.keys[u], ready_seq_++, u});
  }

  // ---- the credit window (schedule/leader.hpp's CreditWindow) ----
  void dispatch(double t) {
    for (;;) {
      if (chosen_) {
        const std::size_t bytes = fp32_bytes(*chosen_);
        if (inflight_units_ > 0 && inflight_bytes_ + bytes > opt_.credit_bytes) return;
        const std::uint32_t u = *chosen_;
        chosen_.reset();
        ++inflight_units_;
        inflight_bytes_ += bytes;
        state_[u].started = t;
        state_[u].stage = 0;
        state_[u].order = started_++;
        begin_stage(u, t);
        continue;
      }
      if (!(inflight_units_ < opt_.inflight_units && inflight_bytes_ < opt_.credit_bytes) || ready_.empty()) return;
      chosen_ = ready_.top().unit;
      ready_.pop();
    }
  }

  void begin_stage(std::uint32_t u, double t) {
    if (r_.stage_offset[u] + state_[u].stage == r_.stage_offset[u + 1]) return complete(u, t);
    const Stage& s = stage_of(u);
    if (s.barrier) return barrier(u, t);
    if (s.count == 0) return push(t + s.delay, Kind::stage_done, u);
    const auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](std::uint32_t w) { return before(u, w); });
    waiting_.insert(at, u);
  }
  /// The tensor whose units a barrier stage of unit u waits for: its first.
  std::uint32_t barrier_of(std::uint32_t u) const { return r_.units[u].segments.front().layer; }
  void barrier(std::uint32_t u, double t) {
    auto& parked = barrier_parked_[barrier_of(u)];
    parked.push_back(u);
    if (parked.size() < barrier_size_[barrier_of(u)]) return;
    for (std::uint32_t v : parked) push(t + stage_of(v).delay, Kind::stage_done, v);
    parked.clear();
  }
  bool before(std::uint32_t a, std::uint32_t b) const {
    const std::uint32_t ka = r_.keys[a], kb = r_.keys[b];
    return ka != kb ? ka < kb : state_[a].order < state_[b].order;
  }

  void complete(std::uint32_t u, double t) {
    --inflight_units_;
    inflight_bytes_ -= fp32_bytes(u);
    for (std::size_t i = unit_layers_offset_[u]; i < unit_layers_offset_[u + 1]; ++i) --layer_pending_[unit_layers_[i]];
    last_done_ = std::max(last_done_, t);
    if (opt_.record) r_.unit_events.push_back({state_[u].iteration, u, state_[u].ready, state_[u].started, t});
  }

  // ---- resources: idle ones go to waiting stages in priority order ----
  void grant(double t) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const std::uint32_t u = *it;
      const Stage& s = stage_of(u);
      bool idle = true;
      for (std::uint8_t i = 0; i < s.count; ++i) idle = idle && !busy_[index(s.uses[i])];
      if (!idle) {
        ++it;
        continue;
      }
      for (std::uint8_t i = 0; i < s.count; ++i) {
        const std::size_t x = index(s.uses[i]);
        busy_[x] = 1;
        held_[x] += s.uses[i].busy;
        push(t + s.uses[i].busy, Kind::release, std::uint32_t(x));
        if (opt_.record)
          r_.transfers.push_back({state_[u].iteration, u, state_[u].stage, s.uses[i].resource, s.uses[i].shard, t,
                                  t + s.uses[i].busy});
      }
      push(t + s.busy() + s.delay, Kind::stage_done, u);
      it = waiting_.erase(it);
    }
  }

  void finish() {
    r_.makespan = std::max(last_done_, compute_end_);
    for (std::size_t i = 0; i + 1 < r_.iteration_start.size(); ++i)
      r_.iteration_seconds.push_back(r_.iteration_start[i + 1] - r_.iteration_start[i]);
    for (std::size_t k = 0; k < resource_kinds; ++k) {
      ResourceUse use{resource_names[k]};
      const std::size_t first = k < 2 ? k : 2 + (k - 2) * shards_, count = k < 2 ? 1 : shards_;
      for (std::size_t x = first; x < first + count; ++x) {
        if (held_[x] == 0) continue;
        ++use.instances;
        use.busy_seconds += held_[x];
        use.max = std::max(use.max, held_[x] / r_.makespan);
      }
      if (use.instances == 0) continue;
      use.mean = use.busy_seconds / double(use.instances) / r_.makespan;
      r_.resources.push_back(use);
    }
  }

  const Profile& profile_;
  Result& r_;
  Options opt_;
  std::size_t shards_;
  // the plan, indexed
  std::vector<std::size_t> segments_left_, unit_layers_offset_, tensor_offset_;
  std::vector<std::uint32_t> unit_layers_;
  std::vector<std::vector<std::uint32_t>> tensor_units_;
  std::vector<int> layer_pending_;  // units of a layer ready and not yet aggregated
  std::vector<std::size_t> barrier_size_;                  // per tensor: units whose first tensor it is
  std::vector<std::vector<std::uint32_t>> barrier_parked_;  // per tensor: units waiting at its barrier
  // state
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready_;
  std::vector<UnitState> state_;
  std::vector<std::uint32_t> waiting_;  // units whose current stage waits for resources, in priority order
  std::vector<double> pace_samples_;    // measured compute per iteration over its median (rank skew)
  std::size_t workers_ = 0;
  std::mt19937_64 rng_{opt_.seed};
  double pace_ = 1;
  std::vector<char> busy_;
  std::vector<double> held_;
  std::optional<std::uint32_t> chosen_;
  std::size_t inflight_units_ = 0, inflight_bytes_ = 0;
  std::uint64_t seq_ = 0, ready_seq_ = 0, started_ = 0;
  std::size_t iteration_ = 0;
  std::ptrdiff_t layer_ = 0;
  bool backward_ = false, computing_ = false;
  double compute_start_ = 0, compute_end_ = 0, last_done_ = 0;
};

}  // namespace detail

/// Simulates `options.iterations` iterations of `profile` with the real `slicing` and `priority`
/// policies, the `codec` and `collective` cost models, on `net`. Throws ConfigError on a bad
/// profile, network, codec rate or window.
template <slicing::Slicing S, priority::Priority P>
Result simulate(const Profile& profile, const S& slicing, P priority, const CodecModel& codec,
                const CollectiveModel& collective, const Network& net, const Options& options) {
  profile.validate();
  net.validate();
  codec.validate();
  if (options.iterations == 0) throw ConfigError("gradsync: simulate at least 1 iteration");
  if (options.inflight_units == 0) throw ConfigError("gradsync: the simulator's inflight_units must be at least 1");
  if (options.credit_bytes == 0) throw ConfigError("gradsync: the simulator's credit_bytes must be at least 1");
  Result r;
  const ModelLayout layout = profile.layout();
  r.units = slicing.plan(layout);
  const std::size_t fp32_below = codec.bypass_threshold(layout);
  r.stage_offset.push_back(0);
  for (std::uint32_t u = 0; u < r.units.size(); ++u) {
    const Unit& unit = r.units[u];
    r.keys.push_back(priority.key(unit));
    const bool fp32 = std::all_of(unit.segments.begin(), unit.segments.end(),
                                  [&](const Segment& s) { return layout.layer(s.layer).elements < fp32_below; });
    collective.stages(UnitWork{u, unit.elements, fp32}, codec, net, r.stages);
    r.stage_offset.push_back(r.stages.size());
  }
  if (std::any_of(r.stages.begin(), r.stages.end(), [](const Stage& s) { return s.barrier; })) {
    // Units parked at a barrier hold their place in the window; a window that holds every unit
    // (KVStore has none) cannot fill up with units waiting for ones it keeps out.
    std::size_t bytes = 0;
    for (const Unit& unit : r.units) bytes += unit.elements * sizeof(float);
    if (r.units.size() > options.inflight_units || bytes > options.credit_bytes)
      throw ConfigError("gradsync: with the tensor pull (MXNet KVStore, no window) the window must hold every unit: " +
                        std::to_string(r.units.size()) + " units, " + std::to_string(bytes) +
                        " bytes; raise --inflight and --credit");
  }
  detail::Engine(profile, r, net, options).run();
  return r;
}

}  // namespace gradsync::sim
