#pragma once
/// sim::detail::Engine: the event loop of simulate() (simulator.hpp, which describes the model it
/// runs), on a plan simulate() has built (Result's units, keys and stages). Events of one time are
/// applied together, then the decisions are taken: the credit window dispatches ready units,
/// idle resources go to waiting stages, and the compute stream advances.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include "collective_model.hpp"
#include "median.hpp"
#include "network.hpp"
#include "options.hpp"
#include "profile.hpp"
#include "result.hpp"

namespace gradsync::sim {

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

  // ---- the credit window (schedule/credit_window.hpp's CreditWindow) ----
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

}  // namespace gradsync::sim
