#pragma once
// SGD with momentum, weight decay only on `decay` parameters (not biases or batch norm, as in
// ImageNet-in-4-minutes), optional LARS trust ratios; and the learning-rate schedules.
// The optimizer steps one parameter tensor at a time: the trainer calls it per layer in forward.
#include <string>
#include <vector>

#include "gradsync/trainer/module.hpp"

namespace gradsync::trainer {

struct OptimizerConfig {
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
  bool lars = false;
  float lars_coefficient = 0.001f;  ///< eta: local lr = eta * |w| / (|g| + wd |w|)
};

class Optimizer {
 public:
  Optimizer(const std::vector<Param*>& params, OptimizerConfig config);
  /// Applies the gradient in p.grad to p.value with learning rate lr.
  void step(Param& p, float lr);
  /// Momentum buffers, one per parameter in forward order (checkpointed).
  std::vector<Tensor>& state() { return velocity_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  std::vector<Tensor> velocity_;
};

/// Linear warm-up from lr/warmup to lr over `warmup` iterations, then decay over the rest:
/// constant, step (x0.1 at 50% and 75%), cosine (to 0), or poly (power 2, to 0).
class LrSchedule {
 public:
  LrSchedule(float base, std::string kind, std::size_t warmup, std::size_t total);
  float operator()(std::size_t iteration) const;
  static const std::vector<std::string>& kinds();

 private:
  float base_;
  std::string kind_;
  std::size_t warmup_, total_;
};

}  // namespace gradsync::trainer
