#include "gradsync/trainer/retune.hpp"

#include <cstdio>

namespace gradsync::trainer {

namespace {
bool same(const sim::Setting& a, const sim::Setting& b) {
  return a.slicing == b.slicing && a.collective == b.collective && a.inflight_units == b.inflight_units &&
         a.credit_bytes == b.credit_bytes;
}
}  // namespace

RetuningSync::RetuningSync(transport::Transport& t, std::size_t tensors, Tuning first, sim::Profile profile,
                           sim::TuneSpace space, std::size_t every, Build build, std::vector<Retune>* log,
                           Statistics* report)
    : t_(t), tensors_(tensors), every_(every), tuning_(std::move(first)), profile_(std::move(profile)),
      space_(std::move(space)), build_(std::move(build)), log_(log), report_(report),
      watch_(tolerance),
      sync_(build_(tuning_.chosen, meter_)) {
  if (every_ == 0) throw ConfigError("--retune-every must be at least 1 iteration");
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
}

void RetuningSync::load_state(std::size_t iteration, std::span<const float> saved) {
  sync_->load_state(iteration, saved);
  iteration_ = iteration;
}

// The last tensor's mean is in: nothing of this Synchronizer is in flight.
void RetuningSync::wait_for(std::size_t tensor) {
  sync_->wait_for(tensor);
  if (tensor + 1 == tensors_ && iteration_ % every_ == 0) recheck();
}

void RetuningSync::recheck() {
  const sim::LinkWindow window = meter_.take();  // every rank: the window restarts alike
  if (t_.size() == 1) return;                     // no link
  // Rank 0 tells every rank whether the rate moved (0: it held); then all measure the link again
  // and tune as at start-up, since the spans read the link's rate only where it is the bottleneck.
  double moved = 0;
  if (t_.rank() == 0) moved = watch_.observe(window.rate()).value_or(0);
  from_rank0(t_, retune_tag, moved);
  if (moved == 0) return;
  Tuning next = tune_on_link(t_, profile_, space_);
  const bool change = !same(next.chosen, tuning_.chosen);
  tuning_ = std::move(next);
  if (change) {
    retired_ += sync_->statistics();
    sync_.reset();  // drained: its destructor waits for nothing
    sync_ = build_(tuning_.chosen, meter_);
    sync_->load_state(iteration_, {});  // stochastic codecs key their random numbers on the iteration
  }
  std::fprintf(stderr,
               "gradsync-train: rank %d: --retune-every: after iteration %zu the units' rate moved x%.2g; the link "
               "measures %.3g Gbit/s; %s --slicing %s --collective %s --inflight %zu --credit %zu\n",
               t_.rank(), iteration_, moved, tuning_.link.bytes_per_second * 8 / 1e9, change ? "switched to" : "kept",
               tuning_.chosen.slicing.c_str(), tuning_.chosen.collective.c_str(), tuning_.chosen.inflight_units,
               tuning_.chosen.credit_bytes >> 20);
  if (log_) log_->push_back({iteration_, tuning_.link.bytes_per_second, tuning_.chosen, change});
}

}  // namespace gradsync::trainer
