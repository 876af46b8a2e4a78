#pragma once
// gradsync-train's command line: its flags (CLI11) parsed into RunOptions, the one value the rest
// of the program reads.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::cli {

/// The `make run` default: AlexNet-BN at 1/8 width, 4 in-process ranks x 16 = 64 images per step,
/// 3 epochs, P3 policies; measured figures in trainer/README.md.
TrainConfig default_config();

/// The synchronizer's policies, as named by the flags.
struct Policies {
  std::string sync = "library";  ///< library: gradsync::AnySynchronizer; local: the exact reference all-reduce
  std::string slicing = "fixed:40000", priority = "forward", codec = "fp32", collective = "ring";
};

/// What the flags ask for: the training itself, and how gradsync-train sets it up and reports it.
struct RunOptions {
  TrainConfig train = default_config();
  Policies policies;
  std::string input;                ///< --input as given (resolve_model reads it)
  std::string metrics, trace_path, profile_path;
  std::string bandwidth;            ///< --bandwidth: the emulated links
  std::pair<std::size_t, std::string> bandwidth_change;  ///< --bandwidth-change ITERATION:LINK
  bool tune = false;                ///< --tune, --slicing auto, or the default where it can run (choose_default_tuning)
  bool slicing_auto = false;        ///< --tune spelt --slicing auto
  std::string tune_profile_path;
  std::vector<std::string> tune_collectives{"ring"};
  std::size_t retune_every = 0;
  std::size_t tune_steady = 5;  ///< --tune: tune again on rank 0's compute after this many iterations (0: never)
  unsigned inflight = 0;
  double credit_mb = 0;
  double timeout_s = 600;
  std::set<std::string, std::less<>> given;  ///< every name of every flag on the command line

  bool was_given(std::string_view flag) const { return given.contains(flag); }
  /// How long any wait for a peer may last (--timeout).
  std::chrono::milliseconds patience() const;
};

/// Parses the command line into `options`. Returns the exit status where that ends the run (--help,
/// a bad flag: CLI11 has printed why), else nothing.
std::optional<int> parse_command_line(int argc, char** argv, RunOptions& options);

/// The model's input shape and classes and the data set, from --input and the model's own defaults
/// (lstm-lm: tokens). Throws where the flags cannot go together.
void resolve_model(RunOptions& options);

}  // namespace gradsync::trainer::cli
