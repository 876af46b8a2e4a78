#pragma once
// Dynamic loss scaling for mixed precision (ImageNet in four minutes, section 4.1): the loss is
// multiplied by `scale` before backward so small fp16 gradients do not flush to zero; gradients are
// unscaled in fp32 before the optimizer. A step whose gradients overflowed (Inf/NaN) is skipped
// and the scale halved; after `growth_interval` clean steps in a row the scale doubles.
// Backend-agnostic: it only sees the scale and a flag (MixedPrecision::unscale does the tensors).
//
//   LossScaler scaler;
//   loss_grad *= scaler.scale();  backward();
//   grads *= 1 / scaler.scale();  bool overflow = any Inf/NaN in grads;  // every rank must agree: see below
//   if (scaler.update(overflow)) optimizer.step();
//
// With data parallelism the overflow flag must be the same on every rank (otherwise replicas
// diverge): a lossless all-reduce already spreads Inf/NaN to every rank, so unscaling the
// aggregated gradients gives every rank the same flag.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <gradsync/core/error.hpp>

namespace gradsync::trainer {

class LossScaler {
 public:
  struct Config {
    float initial_scale = 65536.0f;  // 2^16
    float growth_factor = 2.0f;
    float backoff_factor = 0.5f;
    int growth_interval = 2000;      // clean steps before the scale grows
    float min_scale = 1.0f;
    float max_scale = 16777216.0f;   // 2^24
  };

  LossScaler() : LossScaler(Config{}) {}
  explicit LossScaler(Config c) : c_(c), scale_(c.initial_scale) {
    if (!(c.initial_scale > 0) || !(c.growth_factor > 1) || !(c.backoff_factor > 0 && c.backoff_factor < 1) ||
        c.growth_interval < 1 || !(c.min_scale > 0) || c.min_scale > c.max_scale)
      throw UsageError(
          "LossScaler: need initial_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1 and "
          "0 < min_scale <= max_scale");
  }

  float scale() const { return scale_; }
  std::uint64_t skipped_steps() const { return skipped_; }

  /// Everything update() has learned: checkpoints carry it so a resumed run scales as an
  /// uninterrupted one would.
  struct State {
    float scale;
    int clean;  // clean steps since the scale last changed
    std::uint64_t skipped;
  };
  State state() const { return {scale_, clean_, skipped_}; }
  void restore(const State& s) {
    if (!(s.scale >= c_.min_scale && s.scale <= c_.max_scale) || s.clean < 0 || s.clean >= c_.growth_interval)
      throw UsageError("LossScaler: saved state (scale " + std::to_string(s.scale) + ", " +
                                  std::to_string(s.clean) + " clean steps) is outside this configuration's limits");
    scale_ = s.scale;
    clean_ = s.clean;
    skipped_ = s.skipped;
  }

  /// Records the outcome of one step; returns true when the step should be applied.
  bool update(bool overflow) {
    if (overflow) {
      scale_ = std::fmax(c_.min_scale, scale_ * c_.backoff_factor);
      clean_ = 0;
      ++skipped_;
      return false;
    }
    if (++clean_ >= c_.growth_interval) {
      scale_ = std::fmin(c_.max_scale, scale_ * c_.growth_factor);
      clean_ = 0;
    }
    return true;
  }

 private:
  Config c_;
  float scale_;
  int clean_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace gradsync::trainer
