#pragma once
// One rank of train(): its replica, optimizer and synchronizer, and the hooks (StepHooks) that tie
// them to the layers. A layer's forward first waits for its gradients' mean from the last
// iteration and steps the optimizer on it; its backward hands the new gradients over at once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gradsync/trainer/layers.hpp"
#include "gradsync/trainer/mixed_precision.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Rank final : public StepHooks {
 public:
  /// Global rank `rank`'s replica, seeded like every rank's, with the synchronizer `factory` makes.
  Rank(const TrainConfig& cfg, std::size_t rank, const SyncFactory& factory);

  Model& model() { return *model_; }
  double wait_seconds() const { return wait_seconds_; }
  Optimizer& optimizer() { return opt_; }
  GradientSync& sync() { return *sync_; }
  const MixedPrecision* mixed() const { return mixed_ ? &*mixed_ : nullptr; }
  LossScaler* scaler() { return mixed_ ? &mixed_->scaler() : nullptr; }
  /// After a checkpoint was loaded into the parameters (mixed: they are the new fp32 masters).
  void adopt_loaded() {
    if (mixed_) mixed_->adopt(model_->params());
  }
  /// Runs f with the fp32 masters as the parameter values (checkpoints, reported weights).
  template <class F>
  void with_masters(F&& f) {
    if (mixed_) mixed_->swap_masters(model_->params());
    f();
    if (mixed_) mixed_->swap_masters(model_->params());
  }

  // Forward of a layer: its gradients from the last iteration must be aggregated and applied first.
  void before_forward(std::span<Param* const> params) override;
  // Backward of a layer: hand its gradients over, last parameter first (decreasing index).
  void after_backward(std::span<Param* const> params) override;

  /// Marks an iteration's start (before its batch is loaded: the first compute span includes it).
  void begin_iteration() {
    mark_ = Clock::now();
    if (profiler_) profiler_->begin_iteration();
  }

  /// One iteration, after begin_iteration(); returns (loss, correct predictions).
  std::pair<float, std::size_t> step(const Tensor& x, const std::vector<std::int32_t>& y, std::uint64_t seed,
                                     std::size_t iteration, float lr);

  /// Waits for and applies every outstanding step (before evaluation, checkpoints, the end).
  void flush() {
    if (mixed_) settle();
    else before_forward(model_->params());
  }

 private:
  // Records the compute since the previous hook as one span of the trace, if there is one; its seconds.
  double compute_span(std::string label);
  // Rank 0 with --profile: a span of a training step goes to its layer (not flushes between steps).
  void profile(LayerProfiler::Pass pass, std::span<Param* const> layer, double seconds) {
    if (profiler_ && in_step_) profiler_->add(pass, layer, seconds);
  }
  static std::string layer_name(const Param& p) { return p.name.substr(0, p.name.rfind('.')); }
  std::span<float> hand_over(Param& p);
  void take_mean(Param& p);
  static Tensor half_input(const Tensor& x);
  void settle();

  std::unique_ptr<Model> model_;
  Optimizer opt_;
  std::unique_ptr<GradientSync> sync_;
  std::optional<MixedPrecision> mixed_;
  std::vector<char> pending_, ready_;
  std::vector<std::span<float>> synced_;     // per tensor: the memory the synchronizer averages
#if defined(GRADSYNC_TRAINER_CUDA)
  std::vector<std::vector<float>> staged_;   // host copies of the gradients
  std::vector<char> on_device_;              // per tensor: handed over in GPU memory (no staging)
#endif
  float pending_lr_ = 0.0f;
  double wait_seconds_ = 0;  // blocked in wait_for: communication not hidden behind compute
  SoftmaxCrossEntropy loss_;
  std::size_t rank_;
  Trace* trace_;
  LayerProfiler* profiler_;  // rank 0's, with --profile
  std::optional<TrainConfig::InjectNan> inject_nan_;
  bool poison_ = false;  // this step's first gradient handed over becomes NaN (fault injection)
  bool in_step_ = false;
  Clock::time_point mark_;
  std::string forward_label_;
  std::span<Param* const> forward_layer_;  // the layer whose forward the open span is (empty: input)
};

}  // namespace gradsync::trainer
