#include "rank.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/kernels.hpp"

namespace gradsync::trainer {

Rank::Rank(const TrainConfig& cfg, std::size_t rank, const SyncFactory& factory)
    : model_(make_model(cfg.model)), opt_((model_->initialize(cfg.seed), model_->params()), cfg.optimizer),
      sync_(factory(rank, *model_)), pending_(model_->params().size(), 0), ready_(pending_.size(), 0),
      synced_(pending_.size()), rank_(rank), trace_(cfg.trace), profiler_(rank == 0 ? cfg.profiler : nullptr),
      inject_nan_(cfg.inject_nan) {
  if (!sync_) throw std::logic_error("sync factory returned no synchronizer for rank " + std::to_string(rank));
  if (cfg.precision == "mixed") mixed_.emplace(model_->params(), cfg.loss_scaling);
#if defined(GRADSYNC_TRAINER_CUDA)
  for (auto* p : model_->params()) on_device_.push_back(!mixed_ && sync_->takes_device_memory(p->index));
#endif
}

void Rank::before_forward(std::span<Param* const> params) {
  if (!params.empty()) {
    profile(LayerProfiler::forward, forward_layer_, compute_span(forward_label_));
    forward_label_ = "forward " + layer_name(*params[0]);
    forward_layer_ = params;
  }
  double waited = 0;
  for (auto* p : params)
    if (pending_[p->index]) {
      const auto t0 = Clock::now();
      sync_->wait_for(p->index);
      waited += since(t0);
      take_mean(*p);
      opt_.step(*p, pending_lr_);
      pending_[p->index] = 0;
    }
  wait_seconds_ += waited;
  if (!params.empty())
    profile(LayerProfiler::forward, params, compute_span("wait_for + step " + layer_name(*params[0])) - waited);
}

void Rank::after_backward(std::span<Param* const> params) {
  if (!params.empty()) profile(LayerProfiler::backward, params, compute_span("backward " + layer_name(*params[0])));
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    Param& p = **it;
    if (ready_[p.index]++) throw std::logic_error(p.name + ": gradient reported twice in one backward");
    if (mixed_) round_to_half(p.grad);  // fp16 storage: an overflow becomes Inf here
    if (poison_ && !p.grad.empty()) {
      backend::for_each(1, kernels::Fill{p.grad.data(), std::numeric_limits<float>::quiet_NaN()});
      poison_ = false;
    }
    sync_->gradient_ready(p.index, hand_over(p));
    pending_[p.index] = 1;
  }
}

std::pair<float, std::size_t> Rank::step(const Tensor& x, const std::vector<std::int32_t>& y, std::uint64_t seed,
                                         std::size_t iteration, float lr) {
  Context ctx{.training = true, .hooks = this, .seed = seed, .step = iteration, .half = mixed_.has_value()};
  backend::set_fp16_gemm(ctx.half);
  in_step_ = true;
  poison_ = inject_nan_ && inject_nan_->rank == rank_ && inject_nan_->iteration == iteration;
  forward_layer_ = {};
  if (mixed_) settle();
  forward_label_ = "forward input";
  Tensor logits = model_->forward(mixed_ ? half_input(x) : x, ctx);
  const float loss = loss_.forward(logits, y);
  profile(LayerProfiler::forward, forward_layer_, compute_span(forward_label_ + " + loss"));
  if (!std::isfinite(loss))
    throw std::runtime_error("loss is " + std::to_string(loss) + " at iteration " + std::to_string(iteration) +
                             " (diverged: lower --lr or add --warmup)");
  sync_->report_loss(loss);
  std::fill(ready_.begin(), ready_.end(), 0);
  Tensor dlogits = loss_.backward().reshaped(logits.shape());
  if (mixed_) mixed_->scale_loss_grad(dlogits);
  model_->backward(dlogits, ctx);
  for (auto* p : model_->params())
    if (!ready_[p->index]) throw std::logic_error(p->name + ": no gradient reported in backward");
  sync_->finish_iteration();
  profile(LayerProfiler::backward, {}, compute_span("backward rest + finish_iteration"));
  in_step_ = false;
  pending_lr_ = lr;
  return {loss, loss_.correct()};
}

double Rank::compute_span(std::string label) {
  const auto now = Clock::now();
  if (trace_) trace_->span(std::move(label), rank_, Trace::compute, mark_, now);
  const double seconds = std::chrono::duration<double>(now - mark_).count();
  mark_ = now;
  return seconds;
}

// On the host the gradient is handed over in place. On the device backend it stays on the GPU:
// with one rank, whose synchronizer reads no gradient (an empty span), and where the synchronizer
// takes it there (its codec encodes it on the device). Otherwise (mixed precision, not yet run on
// that path, or policies that read the gradients on the host) it is staged in host memory, and
// take_mean copies the mean back.
std::span<float> Rank::hand_over(Param& p) {
#if defined(GRADSYNC_TRAINER_CUDA)
  if (!sync_->reads_gradients()) return {};
  if (on_device_[p.index]) {
    cuda::synchronize();  // the kernels that wrote it are done: gradsync's streams do not wait for ours
    synced_[p.index] = std::span<float>(p.grad.data(), p.grad.size());
  } else {
    staged_.resize(synced_.size());
    staged_[p.index] = p.grad.to_host();
    synced_[p.index] = staged_[p.index];
  }
#else
  synced_[p.index] = p.grad.span();
#endif
  return synced_[p.index];
}

void Rank::take_mean(Param& p) {
#if defined(GRADSYNC_TRAINER_CUDA)
  if (sync_->reads_gradients() && !on_device_[p.index]) p.grad.from_host(synced_[p.index]);
#else
  (void)p;
#endif
}

Tensor Rank::half_input(const Tensor& x) {
  Tensor h = x;
  round_to_half(h);
  return h;
}

// Mixed precision: an overflow in any tensor skips the whole step, so every tensor's mean must
// be in before any is applied - the step waits for all of them (no overlap with forward).
void Rank::settle() {
  bool outstanding = false;
  double waited = 0;
  for (auto* p : model_->params())
    if (pending_[p->index]) {
      const auto t0 = Clock::now();
      sync_->wait_for(p->index);
      waited += since(t0);
      pending_[p->index] = 0;
      outstanding = true;
    }
  wait_seconds_ += waited;
  if (outstanding) {
    for (auto* p : model_->params()) take_mean(*p);
    if (mixed_->unscale(model_->params()))
      for (auto* p : model_->params()) mixed_->step(*p, opt_, pending_lr_);
  }
  profile(LayerProfiler::forward, {}, compute_span("wait_for + step (all layers)") - waited);
}

}  // namespace gradsync::trainer
