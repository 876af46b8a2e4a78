#pragma once
// gradsync-train's --tune: when it runs (by flag, as --slicing auto, or by default under mpirun),
// the checks on the flags that go with it, the model profile it simulates, and each rank's part:
// rank 0 measures the link with rank 1 and chooses, every rank builds the chosen synchronizer
// (re-tuned every --retune-every iterations).
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <gradsync/any_synchronizer.hpp>
#include <gradsync/sim/link_meter.hpp>
#include <gradsync/sim/link_tuning.hpp>
#include <gradsync/sim/profile.hpp>

#include "cli/options.hpp"
#include "cli/report.hpp"
#include "gradsync/trainer/layer_profiler.hpp"
#include "gradsync/trainer/sync.hpp"

namespace gradsync::trainer::cli {

/// Without --slicing: --tune where it can run (sets options.tune).
void choose_default_tuning(RunOptions& options);

/// What --tune needs on every rank.
struct TunePlan {
  gradsync::sim::Profile profile;  ///< the model, as the simulator sees it
  gradsync::sim::TuneSpace space;  ///< what it may choose
  std::size_t retune_every = 0;    ///< > 0: re-check the link every this many iterations
  std::size_t steady_after = 0;    ///< > 0: tune again on rank 0's measured compute after this many
};

/// --tune's plan for the parsed `policies`, or none without --tune. Throws ConfigError where a
/// flag chooses what --tune would, goes only with --tune, or keeps state a re-tune would lose.
std::optional<TunePlan> plan_tuning(const RunOptions& options, const gradsync::AnySynchronizer::Policies& policies);

/// A rank's synchronizer of `setting` (null: the flags' own), feeding `meter` when given, its
/// statistics into `stats` when given.
using BuildSync = std::function<std::unique_ptr<GradientSync>(
    const gradsync::sim::Setting* setting, gradsync::sim::LinkMeter* meter, gradsync::Statistics* stats)>;

/// Global rank `rank`'s synchronizer of the setting every rank tunes to at once over `transport`;
/// rank 0 says what it chose (stderr) and keeps it, and its re-tunes, in `rank0`. `profiler`:
/// rank 0's compute per layer (plan.steady_after needs it there), `model` its name.
std::unique_ptr<GradientSync> tuned_sync(gradsync::transport::Transport& transport, std::size_t rank,
                                         std::size_t tensors, const TunePlan& plan, const BuildSync& build,
                                         gradsync::Statistics* stats, Rank0Report& rank0,
                                         const LayerProfiler* profiler, const std::string& model);

}  // namespace gradsync::trainer::cli
