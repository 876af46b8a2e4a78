#include "gradsync/trainer/retune.hpp"

#include <cstdio>
#include <stdexcept>

#include <gradsync/sim/median.hpp>

#include "gradsync/trainer/cpu_time.hpp"

namespace gradsync::trainer {

namespace {
bool same(const sim::Setting& a, const sim::Setting& b) {
  return a.slicing == b.slicing && a.collective == b.collective && a.inflight_units == b.inflight_units &&
         a.credit_bytes == b.credit_bytes;
}
}  // namespace

RetuningSync::RetuningSync(transport::Transport& t, std::size_t tensors, sim::Tuning first, sim::Profile profile,
                           sim::TuneSpace space, RetunePlan plan, Build build, std::vector<Retune>* log,
                           Statistics* report)
    : t_(t), tensors_(tensors), plan_(std::move(plan)), tuning_(std::move(first)), profile_(std::move(profile)),
      space_(std::move(space)), build_(std::move(build)), log_(log), report_(report),
      watch_(tolerance), pace_watch_(pace_tolerance, sim::LinkWatch::Watch::rises),
      sync_(build_(tuning_.chosen, meter_)) {
  if (plan_.steady_after && t.rank() == 0 && !plan_.measured)
    throw std::logic_error("RetuningSync: --tune-steady needs rank 0's measured profile");
}

RetuningSync::~RetuningSync() {
  if (report_) *report_ = statistics();
}

Statistics RetuningSync::statistics() const {
  Statistics s = retired_;
  return s += sync_->statistics();
}

void RetuningSync::finish_iteration() {
  sync_->finish_iteration();
  ++iteration_;
  ++finished_;
  const auto now = std::chrono::steady_clock::now();
  const double cpu = finished_ <= plan_.steady_after ? process_cpu_seconds() : 0;
  if (last_finish_) {
    const double seconds = std::chrono::duration<double>(now - *last_finish_).count();
    window_iterations_.push_back(seconds);
    if (finished_ > steady_warmup && finished_ <= plan_.steady_after) {
      steady_busy_ += seconds - waited_;
      steady_cpu_ += cpu - last_cpu_ - waited_cpu_;
    }
  }
  last_finish_ = now;
  last_cpu_ = cpu;
  waited_ = waited_cpu_ = 0;
}

void RetuningSync::load_state(std::size_t iteration, std::span<const float> saved) {
  sync_->load_state(iteration, saved);
  iteration_ = iteration;
}

// The last tensor's mean is in: nothing of this Synchronizer is in flight.
void RetuningSync::wait_for(std::size_t tensor) {
  // Waits are not compute: neither their time nor the CPU the Synchronizer's threads take in them
  // counts toward the cores (its threads poll while the training thread waits).
  // Timed only in the iterations --tune-steady measures (a process CPU read is a system call).
  if (finished_ < plan_.steady_after) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    sync_->wait_for(tensor);
    waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    waited_cpu_ += process_cpu_seconds() - cpu0;
  } else {
    sync_->wait_for(tensor);
  }
  if (tensor + 1 != tensors_ || t_.size() == 1) return;
  if (plan_.steady_after && finished_ == plan_.steady_after) tune_steady();
  else if (plan_.every && iteration_ % plan_.every == 0) recheck();
}

bool RetuningSync::adopt(sim::Tuning next) {
  const bool change = !same(next.chosen, tuning_.chosen);
  tuning_ = std::move(next);
  if (change) {
    retired_ += sync_->statistics();
    sync_.reset();  // drained: its destructor waits for nothing
    sync_ = build_(tuning_.chosen, meter_);
    sync_->load_state(iteration_, {});  // stochastic codecs key their random numbers on the iteration
  }
  last_finish_ = std::chrono::steady_clock::now();  // tuning is not an iteration
  warming_up_ = true;
  return change;
}

// Rank 0 tunes on the compute it measured, for the link it measured at start; the link watches
// start over under whatever is chosen. Where ranks share cores the start-up choice stays: the
// iteration is then bound by the CPU all ranks need, which the simulator does not model, and its
// choices on the measured compute measured no faster on 4 ranks sharing 2 cores (VGG-11) or slower
// (ResNet-20: one unit in flight; benchmarks/e2e/results/2026-11-30-steady-n4, -n4-resnet20).
void RetuningSync::tune_steady() {
  struct Measured {
    double compute = 0, cores = 0;
  } m;
  if (t_.rank() == 0) {
    profile_ = plan_.measured(finished_);
    m = {profile_.compute_seconds(), steady_busy_ > 0 ? steady_cpu_ / steady_busy_ : 0};
    space_.cores = m.cores;
  }
  transport::broadcast_value(t_, sim::retune_tag, m);
  const bool shared = m.cores > 0 && m.cores < sim::TuneSpace::own_core;
  const double before = tuning_.compute_seconds;
  const bool change = !shared && adopt(sim::tune_for_link(t_, profile_, space_, tuning_.link));
  meter_.take();
  window_iterations_.clear();
  watch_.reset();
  pace_watch_.reset();
  std::fprintf(stderr,
               "gradsync-train: rank %d: --tune-steady: after iteration %zu rank 0's compute measured %.3g s per "
               "iteration on %.2g cores (tuned at start on %.3g s); %s --slicing %s --collective %s --inflight %zu "
               "--credit %zu (simulated %.3f s/iteration)\n",
               t_.rank(), iteration_, m.compute, m.cores, before,
               change ? "switched to" : shared ? "ranks share cores: kept the start-up choice" : "kept",
               tuning_.chosen.slicing.c_str(), tuning_.chosen.collective.c_str(), tuning_.chosen.inflight_units,
               tuning_.chosen.credit_bytes >> 20, tuning_.chosen.iteration_seconds);
  if (log_) log_->push_back({iteration_, tuning_.link.bytes_per_second, tuning_.chosen, change, true, m.compute, m.cores});
}

void RetuningSync::recheck() {
  const sim::LinkWindow window = meter_.take();  // every rank: the window restarts alike
  std::vector<double> times;
  times.swap(window_iterations_);
  // Rank 0 tells every rank whether the rate or the iteration time moved (0: both held); then all
  // measure the link again and tune as at start-up, since the spans read the link's rate only
  // where it is the bottleneck.
  struct Moved {
    double rate = 0, pace = 0;
  } moved;
  if (t_.rank() == 0) {
    moved.rate = watch_.observe(window.rate()).value_or(0);
    if (!times.empty() && !warming_up_) moved.pace = pace_watch_.observe(sim::median(times)).value_or(0);
    warming_up_ = false;
    if (moved.rate != 0 || moved.pace != 0) {  // both watches start over, under whatever is chosen now
      watch_.reset();
      pace_watch_.reset();
    }
  }
  transport::broadcast_value(t_, sim::retune_tag, moved);
  if (moved.rate == 0 && moved.pace == 0) return;
  const bool change = adopt(sim::tune_on_link(t_, profile_, space_));
  char what[96];
  if (moved.rate != 0) std::snprintf(what, sizeof what, "the units' rate moved x%.2g", moved.rate);
  else std::snprintf(what, sizeof what, "the iteration time moved x%.2g", moved.pace);
  std::fprintf(stderr,
               "gradsync-train: rank %d: --retune-every: after iteration %zu %s; the link "
               "measures %.3g Gbit/s, %.0f us one way; %s --slicing %s --collective %s --inflight %zu --credit %zu\n",
               t_.rank(), iteration_, what, tuning_.link.bytes_per_second * 8 / 1e9,
               tuning_.link.latency_seconds * 1e6, change ? "switched to" : "kept",
               tuning_.chosen.slicing.c_str(), tuning_.chosen.collective.c_str(), tuning_.chosen.inflight_units,
               tuning_.chosen.credit_bytes >> 20);
  if (log_)
    log_->push_back(
        {iteration_, tuning_.link.bytes_per_second, tuning_.chosen, change, false, tuning_.compute_seconds, tuning_.cores});
}

}  // namespace gradsync::trainer
