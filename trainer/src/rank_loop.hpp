#pragma once
// One rank's training loop in train(): every rank steps, saves its synchronizer state at
// checkpoints and flushes; rank 0 (the lead) also keeps the figures, evaluates, prints progress
// and writes the checkpoint.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "datasets.hpp"
#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/optimizer.hpp"
#include "gradsync/trainer/trainer.hpp"
#include "rank.hpp"

namespace gradsync::trainer {

// What every rank agrees on before training: the job's size and the iteration plan.
struct IterationPlan {
  std::size_t world;   // replicas in the whole job
  std::size_t bpe;     // batches per epoch
  std::size_t total;   // iterations of the whole run
  std::size_t epochs;
  LrSchedule schedule;
};

class RankLoop {
 public:
  /// Global rank `r`'s loop over `rank`; the lead writes `result`.
  RankLoop(const TrainConfig& cfg, const Datasets& data, const IterationPlan& plan, Rank& rank, std::size_t r,
           TrainResult& result);

  void run();

 private:
  // The iteration to start from: 0, or the checkpoint's.
  std::size_t resume();
  // One training step; the lead records its time, its exposed wait and the synchronizer's blocks.
  void step(std::size_t it, std::size_t epoch, std::size_t index);
  void progress(std::size_t it, std::size_t epoch);
  // Rank 0's replica on `test`; the other ranks carry on until they need its update.
  void evaluate_now(std::size_t it, const Dataset& test);
  void end_epoch(std::size_t it, std::size_t epoch);
  // Replicas must stay identical: one line per rank, compared by scripts (tests/faults).
  void print_digest();
  void finish();

  const TrainConfig& cfg_;
  const Datasets& data_;
  const IterationPlan& plan_;
  Rank& rank_;
  const std::size_t r_;  // global rank
  const bool lead_;
  TrainResult& result_;  // written by the lead only
  ShardedLoader loader_;
  Tensor x_;
  std::vector<std::int32_t> y_;
  EpochMetrics em_;
  double loss_sum_ = 0, correct_ = 0, labels_ = 0, train_seconds_ = 0;
  Clock::time_point epoch_start_, run_start_, last_print_;
  std::size_t done_in_run_ = 0;
  Statistics counted_;  // the lead's synchronizer counters at the last iteration's end
};

}  // namespace gradsync::trainer
