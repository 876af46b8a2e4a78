#pragma once
// Mixed precision as in ImageNet in four minutes (section 4.1): the model computes with fp16
// weights, activations and gradients (accumulating in fp32), the optimizer updates fp32 master
// weights, and dynamic loss scaling keeps small gradients from flushing to zero. On the host the
// fp16 storage is emulated by rounding to fp16 values (half.hpp), so overflow happens exactly
// where a device run overflows.
//
// Per iteration, in the trainer:
//   backward: scale_loss_grad(dlogits); each layer's gradients round_to_half() before
//             gradient_ready - a layer that overflowed hands Inf to the synchronizer;
//   next step: wait_for every tensor, the means in the parameters' gradients, then unscale(params):
//             the mean gradients are the same on every rank and a lossless all-reduce carries
//             Inf/NaN from any rank to all of them, so every rank takes the same decision - apply
//             step() to every parameter, or skip the whole step and halve the scale. The
//             synchronizer must run with check_finite off.
#include <vector>

#include "gradsync/trainer/loss_scaler.hpp"
#include "gradsync/trainer/module.hpp"
#include "gradsync/trainer/optimizer.hpp"

namespace gradsync::trainer {

class MixedPrecision {
 public:
  /// Takes the parameters' values as the fp32 masters (see adopt).
  MixedPrecision(const std::vector<Param*>& params, LossScaler::Config config);

  /// The parameters' current values become the fp32 masters; the values their fp16 copies.
  /// Call again after loading a checkpoint into the values.
  void adopt(const std::vector<Param*>& params);
  /// Exchanges values and masters: around checkpoints and reports, the masters are the model.
  void swap_masters(const std::vector<Param*>& params);

  /// d(loss)/d(logits) times the loss scale, in fp16 storage.
  void scale_loss_grad(Tensor& dlogits) const;
  /// Unscales the parameters' (mean) gradients in place in fp32, in backend memory, and records
  /// the outcome; true when the step applies (no Inf/NaN anywhere), false when it is skipped (the
  /// scale was halved). One read-back from a device, whatever the number of tensors.
  bool unscale(const std::vector<Param*>& params);
  /// The optimizer step on p's fp32 master (LARS norms in fp32 too), then p's fp16 copy refreshed.
  void step(Param& p, Optimizer& optimizer, float lr);

  const LossScaler& scaler() const { return scaler_; }
  LossScaler& scaler() { return scaler_; }

 private:
  LossScaler scaler_;
  std::vector<Tensor> masters_;  // by parameter index
  Buffer<float> nonfinite_;      // unscale: Inf/NaN counts per row of each gradient
};

}  // namespace gradsync::trainer
