#pragma once
// gradsync-train's --tune after start-up: a second choice on the measured compute, and the online
// re-check of --retune-every. The Synchronizer runs the setting --tune chose at start.
//
// Steady state (--tune-steady N): the start-up choice rests on a model profile that is not this
// run's compute (the built-in ones are FLOP estimates: VGG-11 0.33 s where 4 ranks on 2 cores
// compute 0.88 s). After N iterations rank 0 tunes again, for the link it measured at start, on
// the compute profile it measured in them (LayerProfiler: per layer, waits left out, the warm-up
// skipped), and every rank switches where the choice differs. Compute measured under the running
// setting is the steady state's: it includes what the Synchronizer's threads take from it. Rank 0
// also measures the cores it gets (its process's CPU per second outside waits, in the same
// iterations: about 1 with a core of its own, 0.5 where 4 ranks share 2), which settles the
// tuner's ties (sim::TuneSpace::cores); where ranks share cores the start-up choice stays (the
// iteration is bound by CPU there, which the simulator does not model: tune_steady()).
//
// The link (--retune-every N): every N iterations rank 0 reads what
// the link delivered from the units' timings (sim::LinkMeter) and the window's median iteration
// time. When either has moved by more than its tolerance two windows in a row since the last
// (re)tune (sim::LinkWatch), every rank hears so at that boundary and takes part in measuring the
// link again and tuning, as --tune does at start-up (tune_on_link). The iteration time catches
// latency the rate hides (+2 ms on 1 Gbit/s: VGG-11's 2.5 MB units' rate x0.85, its iteration
// x1.3). Only a slower iteration counts (a faster one is mostly the warm-up ending; a faster link
// shows in the rate); it may also be slower compute, which costs one measurement.
//
// Both act where the last tensor's mean has been waited for (no unit in flight: an iteration
// boundary for the Synchronizer). Where the new setting differs from the running one, every rank
// replaces its Synchronizer with one of the new setting, so all switch at the same iteration (the
// new Synchronizers' handshake checks they agree).
//
// Only codecs and priorities without state that depends on the units (no error-feedback
// residual, no DGT): a new slicing would not know where an old unit's residual belongs.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <gradsync/sim/link_meter.hpp>

#include "gradsync/trainer/sync.hpp"
#include <gradsync/sim/link_tuning.hpp>

namespace gradsync::trainer {

/// One re-tune, as every rank made it.
struct Retune {
  std::size_t iteration = 0;    ///< iterations finished when it re-tuned
  double bytes_per_second = 0;  ///< the bandwidth it tuned for
  sim::Setting chosen;
  bool switched = false;        ///< whether `chosen` replaced another setting
  bool steady = false;          ///< --tune-steady's (on the measured compute), not a link change
  double compute_seconds = 0;   ///< the compute per iteration it tuned on
  double cores = 0;             ///< the cores per rank it tuned for (0: not measured)
};

/// When RetuningSync tunes again.
struct RetunePlan {
  std::size_t every = 0;         ///< > 0: re-check the link every this many iterations
  std::size_t steady_after = 0;  ///< > 0: tune on the measured compute after this many iterations
  /// Rank 0: its compute profile of the first `finished` iterations (null on the other ranks).
  std::function<sim::Profile(std::size_t finished)> measured;
};

class RetuningSync final : public GradientSync {
 public:
  /// A Synchronizer of `setting` on this rank; its Options::on_unit must feed `meter`.
  using Build = std::function<std::unique_ptr<GradientSync>(const sim::Setting& setting, sim::LinkMeter& meter)>;

  /// \param first      the setting tune_on_link chose (every rank's the same)
  /// \param profile    rank 0 tunes on it (until the measured one replaces it)
  /// \param log        when given, receives every re-tune (rank 0's report)
  /// \param report     when given, receives this rank's statistics over all its Synchronizers at the end
  RetuningSync(transport::Transport& t, std::size_t tensors, sim::Tuning first, sim::Profile profile, sim::TuneSpace space,
               RetunePlan plan, Build build, std::vector<Retune>* log = nullptr, Statistics* report = nullptr);
  ~RetuningSync() override;

  void gradient_ready(std::size_t tensor, std::span<float> grad) override { sync_->gradient_ready(tensor, grad); }
  void wait_for(std::size_t tensor) override;
  void finish_iteration() override;
  void load_state(std::size_t iteration, std::span<const float> saved) override;
  std::string describe() const override { return sync_->describe(); }
  void abort(const std::string& reason) override { sync_->abort(reason); }
  void report_loss(float loss) override { sync_->report_loss(loss); }
  Statistics statistics() const override;

  /// The relative change of the link's rate that counts as a new network.
  static constexpr double tolerance = 0.5;
  /// The relative rise of the median iteration time that calls for measuring the link again.
  static constexpr double pace_tolerance = 0.3;
  /// Leading iterations --tune-steady does not measure (the LayerProfiler's warm-up too).
  static constexpr std::size_t steady_warmup = 2;

 private:
  void recheck();
  void tune_steady();
  /// Takes `next` on every rank; replaces the Synchronizer where the setting changed (returned).
  bool adopt(sim::Tuning next);

  transport::Transport& t_;
  std::size_t tensors_;
  RetunePlan plan_;
  sim::Tuning tuning_;
  sim::Profile profile_;
  sim::TuneSpace space_;
  Build build_;
  std::vector<Retune>* log_;
  Statistics* report_;
  sim::LinkMeter meter_;
  sim::LinkWatch watch_, pace_watch_;
  std::vector<double> window_iterations_;  // this window's iteration times, seconds
  bool warming_up_ = true;  // the first window after start or a re-tune: not a baseline for the pace
  std::optional<std::chrono::steady_clock::time_point> last_finish_;
  std::unique_ptr<GradientSync> sync_;
  Statistics retired_;            // the replaced Synchronizers' counters
  std::size_t iteration_ = 0;     // iterations finished (a resumed run's count included)
  std::size_t finished_ = 0;      // iterations finished in this run
  double waited_ = 0, waited_cpu_ = 0;  // this iteration's seconds in wait_for, and the process's CPU in them
  double last_cpu_ = 0;           // the process's CPU seconds at the last finish_iteration
  double steady_cpu_ = 0, steady_busy_ = 0;  // --tune-steady's iterations: CPU, and time outside waits
};

}  // namespace gradsync::trainer
