#pragma once
// trainer_vs_pytorch --accuracy --paired-step K (paired_step.cpp, paired_step.py): the trainer's
// iterations 0..K-1 of a run, with the state before and after the last one and its gradients,
// for PyTorch to take the same step from the same state.
#include <cstddef>
#include <string>

#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::bench {

struct PairedStep {
  double direct_vs_train = 0;  ///< largest |weight - train()'s| after the k iterations
  Evaluation test;             ///< the trainer's evaluate() of its state after them, whole test set
};

/// Trains c's model for k iterations of c's run (its schedule over the whole run) with the
/// trainer's model, optimizer and loader driven directly, and writes into dir (which holds the
/// start: weights.f32 and order0.u32): pre_weights.f32, pre_velocity.f32, pre_buffers.f32 (before
/// iteration k-1), grads.f32 (its gradients), post_*.f32 (after it), losses.txt. Returns the
/// largest difference between its final weights and train()'s (stop_after = k), zero when the
/// driven loop is the trainer's own arithmetic, and the test set's evaluation of its final state.
PairedStep run_paired_step(const TrainConfig& c, std::size_t k, const std::string& dir);

}  // namespace gradsync::trainer::bench
