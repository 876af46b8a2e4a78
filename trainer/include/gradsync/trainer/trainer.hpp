#pragma once
// Data-parallel training with N in-process ranks (threads), each with its own model replica and
// data shard, all starting from the same seeded weights. Each rank's step:
//   forward:  per layer, wait_for(its tensors) + optimizer step with last iteration's gradient, compute;
//   backward: per layer, gradient_ready(its tensors) as soon as written; then finish_iteration().
// Before evaluation and checkpoints rank 0 waits for and applies every outstanding step.
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/layer_profiler.hpp"
#include "gradsync/trainer/loss_scaler.hpp"
#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/optimizer.hpp"
#include "gradsync/trainer/sync.hpp"
#include "gradsync/trainer/trace.hpp"

namespace gradsync::trainer {

struct TrainConfig {
  ModelConfig model;
  std::string dataset = "fashion-mnist";  ///< or "synthetic" (images of model.input, or tokens for lstm-lm)
  std::string data_dir = fashion_mnist_dir;
  std::size_t synthetic_train = 8192, synthetic_test = 1024;
  std::size_t batch = 64;                 ///< per rank
  std::size_t epochs = 1;
  std::size_t iterations = 0;             ///< > 0: train exactly this many iterations instead
  float lr = 0.1f;
  std::string lr_schedule = "cosine";
  double warmup_epochs = 0.0;
  OptimizerConfig optimizer;
  std::string precision = "fp32";         ///< or "mixed": fp16 compute, fp32 masters, loss scaling
  LossScaler::Config loss_scaling;        ///< mixed only
  std::uint64_t seed = 1;
  std::size_t ranks = 1;                  ///< replicas this process runs (threads)
  std::size_t world = 0;                  ///< > 0: ranks in the whole job (MPI); 0: `ranks`
  std::size_t first_rank = 0;             ///< global rank of this process's first replica
  Trace* trace = nullptr;                 ///< when set, per-layer compute spans are recorded
  LayerProfiler* profiler = nullptr;      ///< when set, rank 0's compute per layer (gradsync-sim's profile)
  int threads = 2;                        ///< compute threads in all; each rank gets threads / ranks (>= 1)
  std::string checkpoint;                 ///< written at every epoch end, every checkpoint_every iterations, and when the call ends
  std::size_t checkpoint_every = 0;
  std::string resume;                     ///< checkpoint to continue from (same configuration)
  std::size_t stop_after = 0;             ///< > 0: stop after this many iterations of this call (as if preempted)
  bool evaluate = true;                   ///< test accuracy at each epoch end
  std::size_t evaluate_every = 0;         ///< > 0: also every this many iterations (time to accuracy)
  std::size_t evaluate_samples = 0;       ///< > 0: the evaluate_every ones test on the last this many test samples
                                          ///< only (faster); epoch ends, the run's end included, on the whole test set
  bool progress = true;                   ///< progress line on stderr
  bool print_digest = false;              ///< every rank prints a digest of its final weights (replicas must agree)
  /// Fault injection (tests/faults): rank `rank` hands over a NaN gradient at iteration `iteration`.
  struct InjectNan {
    std::size_t rank = 0, iteration = 0;
  };
  std::optional<InjectNan> inject_nan;
  /// Called by every rank (global rank, iteration) before each of its iterations: a network that
  /// changes under the running job (gradsync-train --bandwidth-change).
  std::function<void(std::size_t rank, std::size_t iteration)> before_iteration;
};

struct EpochMetrics {
  std::size_t epoch = 0, iterations = 0;
  double train_loss = 0, train_accuracy = 0;  ///< rank 0's batches
  double test_loss = 0, test_accuracy = 0;    ///< rank 0's replica on the whole test set
  double seconds = 0, images_per_second = 0;  ///< training only, all ranks' images
};

/// A test-set evaluation during training (every epoch end, and every TrainConfig::evaluate_every).
struct Evaluated {
  std::size_t iteration = 0;                  ///< iterations done (this call's first counts from the resume point)
  double train_seconds = 0;                   ///< rank 0's summed iteration times so far (evaluations excluded)
  double test_loss = 0, test_accuracy = 0;
};

struct TrainResult {
  std::vector<EpochMetrics> epochs;
  std::vector<Evaluated> evaluations;
  std::size_t iterations = 0;                 ///< run in this call (after a resume: the remainder)
  double seconds = 0, images_per_second = 0;
  double test_loss = 0, test_accuracy = 0;    ///< last evaluation
  std::size_t parameters = 0;
  double sync_wait_seconds = 0;               ///< rank 0 blocked in wait_for (exposed communication)
  /// Rank 0, per iteration of this call: wall seconds (batch + step; nothing else runs between two
  /// iterations but epoch ends) and the part blocked in wait_for; when the first one began (Unix
  /// seconds), so that outside measurements (link counters) can be lined up with iterations.
  std::vector<double> iteration_seconds, iteration_wait_seconds;
  /// Rank 0, per iteration: the CPU time of its whole process (compute, executors, the transport's
  /// threads; with in-process ranks, all of them), to compare what synchronization costs in CPU.
  std::vector<double> iteration_process_cpu_seconds;
  double first_iteration_unix = 0;
  /// Rank 0, per iteration: DGT's blocks (important, sent best-effort, dropped) its units reported
  /// by the iteration's end (units finish asynchronously: some land in the next); zeros otherwise.
  std::vector<std::array<std::uint64_t, 3>> iteration_blocks;
  /// Rank 0, per iteration: its batch's training loss (what DGT's p follows, and the learning
  /// curve per iteration).
  std::vector<float> iteration_loss;
  std::uint64_t skipped_steps = 0;            ///< mixed: steps skipped for overflow (the same on every rank)
  float loss_scale = 0;                       ///< mixed: the final loss scale
  std::vector<std::vector<float>> weights;    ///< rank 0's final parameters, forward order
};

/// Makes rank r's synchronizer for `model` (layout: model.layout()); called on rank r's thread.
using SyncFactory = std::function<std::unique_ptr<GradientSync>(std::size_t rank, const Model& model)>;

/// Trains as configured. Without a factory: SingleRankSync for one rank, the exact
/// LocalAllReduceGroup for several.
TrainResult train(const TrainConfig& config, SyncFactory make_sync = {});

struct Evaluation {
  double loss = 0, accuracy = 0;
};
/// `half`: compute with fp16 activations, as a mixed-precision model runs.
Evaluation evaluate(Model& model, const Dataset& data, std::size_t batch = 500, bool half = false);

/// Checkpoint: the configuration that must match, the synchronization (GradientSync::describe),
/// the iteration, parameters, momentum, buffers, and the loss scaler's state under mixed precision
/// (`scaler`, else null). Written by rank 0.
void save_checkpoint(const std::string& path, const TrainConfig& config, std::size_t iteration, const Model& model,
                     Optimizer& optimizer, const GradientSync& sync, const LossScaler* scaler);
/// Rank `rank`'s synchronizer state (codec residuals, DGT contributions), when it has any, in sync_state_path(path,
/// rank): every rank writes its own at each checkpoint.
void save_sync_state(const std::string& path, std::size_t rank, std::size_t iteration, const GradientSync& sync);
std::string sync_state_path(const std::string& checkpoint, std::size_t rank);  ///< "<checkpoint>.rank<r>"
/// "<checkpoint>.prev": each save keeps the file it replaces there (with its ".rank<r>" files), a
/// whole checkpoint of the generation before.
std::string previous_checkpoint_path(const std::string& checkpoint);
/// Restores into model, optimizer, rank `rank`'s synchronizer and `scaler` (mixed precision, else
/// null); returns the iteration to continue from. With codec state, `path`'s generation is used only
/// if all `world` ranks' state files for it are there (a run killed while checkpointing has some
/// ranks' files newer than rank 0's, or older), else the previous one; every rank reads every
/// rank's files, so all choose alike. Throws std::runtime_error naming the file and what differs.
std::size_t load_checkpoint(const std::string& path, const TrainConfig& config, Model& model, Optimizer& optimizer,
                            GradientSync& sync, std::size_t rank, std::size_t world, LossScaler* scaler);

}  // namespace gradsync::trainer
