#pragma once
// gradsync-train's synchronizer per rank (--sync and the policy flags): the library's
// AnySynchronizer (in the CUDA build the device one, device_sync.hpp), tuned where --tune says,
// or the trainer's exact local all-reduce (--sync local).
#include "cli/options.hpp"
#include "cli/ranks.hpp"
#include "cli/report.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::cli {

/// The factory train() calls on each rank's thread; empty for --sync local. Parses and checks the
/// policies here, once, before any data loads or rank starts: a bad name fails at once. `ranks`
/// and `rank0` must outlive the training.
SyncFactory make_sync_factory(const RunOptions& options, Ranks& ranks, Rank0Report& rank0);

}  // namespace gradsync::trainer::cli
