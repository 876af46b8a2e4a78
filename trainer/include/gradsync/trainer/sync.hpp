#pragma once
// The trainer's seam to gradient synchronization. "Tensor" t is the model's t-th parameter tensor
// in forward order (Model::params(), Model::layout()).
//
// Contract, per iteration, as the trainer calls it:
//   backward: gradient_ready(t, grad) once for every t, in decreasing t, the moment t's gradient is
//             written; the span stays valid and untouched by the trainer until wait_for(t) returns;
//   then      finish_iteration();
//   next forward (or before evaluation / checkpoint): wait_for(t) in increasing t; on return the
//             span holds the MEAN of all ranks' gradients for t; the trainer then steps t.
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>
#include <gradsync/core/error.hpp>

#include <gradsync/core/statistics.hpp>

namespace gradsync::trainer {

struct GradientSync {
  virtual void gradient_ready(std::size_t tensor, std::span<float> grad) = 0;
  virtual void wait_for(std::size_t tensor) = 0;
  virtual void finish_iteration() = 0;
  virtual ~GradientSync() = default;

  // Checkpoints. state(): what this rank's synchronizer must carry across a resume to continue
  // bit-identically besides the iteration (error-feedback residuals, DGT's contributions);
  // empty when nothing; state_size() values. Called between iterations, after wait_for on every
  // tensor. load_state: before the first gradient_ready of a resumed run, with the iteration it
  // continues from (stochastic codecs key their random numbers on it) and the saved state.
  // describe() names the synchronization (policies and codec): a resume must use the same.
  virtual std::size_t state_size() const { return 0; }
  virtual std::vector<float> state() const { return {}; }
  virtual void load_state(std::size_t /*iteration*/, std::span<const float> saved) {
    if (!saved.empty()) throw UsageError("this synchronizer keeps no state to restore");
  }
  virtual std::string describe() const { return "exact all-reduce"; }
  /// This rank cannot go on (`reason`): tell the other ranks, so none waits for it. Called before
  /// the synchronizer is destroyed by the failure.
  virtual void abort(const std::string& reason) { (void)reason; }
  /// This iteration's training loss, after forward (DGT keeps p = p0 * loss_t / loss_0 important).
  virtual void report_loss(float loss) { (void)loss; }
  /// This rank's counters so far (units finish asynchronously: an iteration's may land later).
  virtual Statistics statistics() const { return {}; }
  /// Whether gradient_ready's spans are read at all. When not, a device trainer keeps its
  /// gradients on the device and hands over empty spans instead of staging them on the host.
  virtual bool reads_gradients() const { return true; }
  /// Whether gradient_ready takes tensor t's gradient in GPU memory (the CUDA trainer then hands
  /// its device gradient over without a host copy); by default gradients are in host memory.
  virtual bool takes_device_memory(std::size_t tensor) const {
    (void)tensor;
    return false;
  }
};

/// One rank: the local gradient is already the mean.
struct SingleRankSync final : GradientSync {
  bool reads_gradients() const override { return false; }
  void gradient_ready(std::size_t, std::span<float>) override {}
  void wait_for(std::size_t) override {}
  void finish_iteration() override {}
};

/// A reference all-reduce for N in-process ranks (threads), blocking in finish_iteration: no
/// overlap, but exact and deterministic (sums in rank order), so it is the yardstick the real
/// synchronizer's runs are compared with. Every rank must finish the same iterations.
class LocalAllReduceGroup {
 public:
  LocalAllReduceGroup(std::size_t ranks, std::vector<std::size_t> tensor_sizes);
  std::unique_ptr<GradientSync> rank(std::size_t r);
  /// Wakes every waiting rank with an exception (a rank failed); later calls throw too.
  void abort();

 private:
  class Rank;
  void arrive_and_wait();
  void reduce(std::size_t r);

  std::size_t ranks_;
  std::vector<std::size_t> sizes_;
  std::vector<std::vector<std::span<float>>> grads_;  // [rank][tensor]
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t arrived_ = 0, generation_ = 0;
  bool aborted_ = false;
};

}  // namespace gradsync::trainer
