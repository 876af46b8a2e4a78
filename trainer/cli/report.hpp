#pragma once
// What gradsync-train tells its user: the line that says what runs (stderr), the summary at the end
// (stdout) and the metrics file (--metrics, JSON). Rank 0 of a job reports.
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include <gradsync/core/statistics.hpp>

#include "cli/options.hpp"
#include "gradsync/trainer/retune.hpp"  // Retune and sim::Tuning
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::cli {

/// What rank 0's synchronizer hands back for the report.
struct Rank0Report {
  gradsync::Statistics stats;                  ///< its statistics, once it is destroyed
  std::optional<gradsync::sim::Tuning> tuned;  ///< the --tune choice
  std::vector<Retune> retunes;                 ///< the --retune-every re-tunes
};

/// On rank 0: the model, data, ranks and policies about to run (stderr).
void print_banner(const RunOptions& options);

/// The end of a run on rank 0: the summary lines (stdout), and the --metrics file when asked for.
void report(const RunOptions& options, const TrainResult& result, const Rank0Report& rank0);

/// The --metrics document; `policies` as they ran (--tune's choice in place of the flags').
nlohmann::json metrics_json(const TrainConfig& c, const Policies& policies, const TrainResult& result,
                            const Rank0Report& rank0);

}  // namespace gradsync::trainer::cli
