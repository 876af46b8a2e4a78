#include "gradsync/trainer/trainer.hpp"
#include <gradsync/core/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <string_view>
#include <thread>

#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/kernels.hpp"
#include "gradsync/trainer/mixed_precision.hpp"

namespace gradsync::trainer {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One rank: its replica, optimizer and synchronizer, and the hooks that tie them to the layers.
class Rank final : public StepHooks {
 public:
  Rank(const TrainConfig& cfg, std::size_t rank, const SyncFactory& factory)
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
  void before_forward(std::span<Param* const> params) override {
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
  // Backward of a layer: hand its gradients over, last parameter first (decreasing index).
  void after_backward(std::span<Param* const> params) override {
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

  /// Marks an iteration's start (before its batch is loaded: the first compute span includes it).
  void begin_iteration() {
    mark_ = Clock::now();
    if (profiler_) profiler_->begin_iteration();
  }

  /// One iteration, after begin_iteration(); returns (loss, correct predictions).
  std::pair<float, std::size_t> step(const Tensor& x, const std::vector<std::int32_t>& y, std::uint64_t seed,
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

  /// Waits for and applies every outstanding step (before evaluation, checkpoints, the end).
  void flush() {
    if (mixed_) settle();
    else before_forward(model_->params());
  }

 private:
  // Records the compute since the previous hook as one span of the trace, if there is one; its seconds.
  double compute_span(std::string label) {
    const auto now = Clock::now();
    if (trace_) trace_->span(std::move(label), rank_, Trace::compute, mark_, now);
    const double seconds = std::chrono::duration<double>(now - mark_).count();
    mark_ = now;
    return seconds;
  }
  // Rank 0 with --profile: a span of a training step goes to its layer (not flushes between steps).
  void profile(LayerProfiler::Pass pass, std::span<Param* const> layer, double seconds) {
    if (profiler_ && in_step_) profiler_->add(pass, layer, seconds);
  }
  static std::string layer_name(const Param& p) { return p.name.substr(0, p.name.rfind('.')); }
  // On the host the gradient is handed over in place. On the device backend it stays on the GPU:
  // with one rank, whose synchronizer reads no gradient (an empty span), and where the synchronizer
  // takes it there (its codec encodes it on the device). Otherwise (mixed precision, not yet run on
  // that path, or policies that read the gradients on the host) it is staged in host memory, and
  // take_mean copies the mean back.
  std::span<float> hand_over(Param& p) {
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
  void take_mean(Param& p) {
#if defined(GRADSYNC_TRAINER_CUDA)
    if (sync_->reads_gradients() && !on_device_[p.index]) p.grad.from_host(synced_[p.index]);
#else
    (void)p;
#endif
  }
  static Tensor half_input(const Tensor& x) {
    Tensor h = x;
    round_to_half(h);
    return h;
  }
  // Mixed precision: an overflow in any tensor skips the whole step, so every tensor's mean must
  // be in before any is applied - the step waits for all of them (no overlap with forward).
  void settle() {
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

struct Datasets {
  Dataset train, test;
  Dataset test_sample;  // TrainConfig::evaluate_samples' tail of test, if set: the evaluations between epoch ends
};

Datasets load_data(const TrainConfig& cfg) {
  if (cfg.dataset == "fashion-mnist") {
    if (cfg.model.input != Shape{1, 28, 28})
      throw ConfigError("fashion-mnist images are [1, 28, 28]; the model input is " +
                                  to_string(cfg.model.input));
    if (cfg.model.classes != 10) throw ConfigError("fashion-mnist has 10 classes");
    return {load_fashion_mnist(true, cfg.data_dir), load_fashion_mnist(false, cfg.data_dir)};
  }
  if (cfg.dataset == "synthetic") {
    // One draw split in two, so the test samples share the training samples' class patterns.
    const std::size_t n = cfg.synthetic_train + cfg.synthetic_test;
    Dataset all = cfg.model.name == "lstm-lm"
                      ? synthetic_tokens(cfg.model.input.at(0), cfg.model.classes, n, cfg.seed)
                      : synthetic_images(cfg.model.input, cfg.model.classes, n, cfg.seed);
    Dataset test = split_tail(all, cfg.synthetic_test);
    return {std::move(all), std::move(test)};
  }
  throw ConfigError("unknown dataset '" + cfg.dataset + "' (valid: fashion-mnist, synthetic)");
}

std::string what(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

std::string clock_text(double s) {
  char buf[32];
  const long t = long(s + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace

Evaluation evaluate(Model& model, const Dataset& data, std::size_t batch, bool half) {
  SoftmaxCrossEntropy loss;
  Context ctx{.half = half};  // eval mode, no hooks
  backend::set_fp16_gemm(half);
  double total_loss = 0;
  std::size_t correct = 0;
  std::vector<std::uint32_t> idx;
  Tensor x;
  std::vector<std::int32_t> y;
  for (std::size_t first = 0; first < data.size(); first += batch) {
    const std::size_t n = std::min(batch, data.size() - first);
    idx.resize(n);
    for (std::size_t i = 0; i < n; ++i) idx[i] = std::uint32_t(first + i);
    gather_samples(data, idx.data(), n, x, y);
    if (half) round_to_half(x);
    total_loss += double(loss.forward(model.forward(x, ctx), y)) * double(y.size());
    correct += loss.correct();
  }
  const double labels = double(data.size() * data.labels_per_sample);
  return {total_loss / labels, double(correct) / labels};
}

namespace {

// What every rank agrees on before training: the job's size and the iteration plan.
struct Plan {
  std::size_t world;   // replicas in the whole job
  std::size_t bpe;     // batches per epoch
  std::size_t total;   // iterations of the whole run
  std::size_t epochs;
  LrSchedule schedule;
};

// One rank's training loop. Every rank steps, saves its synchronizer state and flushes; rank 0
// (the lead) also keeps the figures, evaluates, prints progress and writes the checkpoint.
class RankLoop {
 public:
  RankLoop(const TrainConfig& cfg, const Datasets& data, const Plan& plan, Rank& rank, std::size_t r,
           TrainResult& result)
      : cfg_(cfg), data_(data), plan_(plan), rank_(rank), r_(r), lead_(r == 0), result_(result),
        loader_(data.train, cfg.batch, r, plan.world, cfg.seed) {}

  void run() {
    const std::size_t start = resume();
    const std::size_t end = cfg_.stop_after ? std::min(plan_.total, start + cfg_.stop_after) : plan_.total;
    if (lead_) result_.parameters = rank_.model().parameter_count();
    epoch_start_ = run_start_ = last_print_ = Clock::now();
    for (std::size_t it = start; it < end; ++it) {
      const std::size_t epoch = it / plan_.bpe, index = it % plan_.bpe;
      if (lead_ && it == start)
        result_.first_iteration_unix =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      step(it, epoch, index);
      const bool epoch_end = index == plan_.bpe - 1 || it + 1 == plan_.total;
      const bool save_now = !cfg_.checkpoint.empty() &&
                            (epoch_end || it + 1 == end || (cfg_.checkpoint_every && (it + 1) % cfg_.checkpoint_every == 0));
      if (save_now) {  // every rank: its synchronizer state, once its units of this iteration are done
        rank_.flush();
        save_sync_state(cfg_.checkpoint, r_, it + 1, rank_.sync());
      }
      if (!lead_) continue;
      if (cfg_.progress && (since(last_print_) > 1.0 || epoch_end)) progress(it, epoch);
      if (cfg_.evaluate && !epoch_end && cfg_.evaluate_every && (it + 1) % cfg_.evaluate_every == 0)
        evaluate_now(it, data_.test_sample.size() ? data_.test_sample : data_.test);
      if (epoch_end) end_epoch(it, epoch);
      if (save_now)
        rank_.with_masters([&] {
          save_checkpoint(cfg_.checkpoint, cfg_, it + 1, rank_.model(), rank_.optimizer(), rank_.sync(), rank_.scaler());
        });
      if (epoch_end) epoch_start_ = Clock::now();
    }
    rank_.flush();
    if (cfg_.print_digest) print_digest();
    if (lead_) finish();
  }

 private:
  // The iteration to start from: 0, or the checkpoint's.
  std::size_t resume() {
    if (cfg_.resume.empty()) return 0;
    const std::size_t start =
        load_checkpoint(cfg_.resume, cfg_, rank_.model(), rank_.optimizer(), rank_.sync(), r_, plan_.world,
                        rank_.scaler());
    rank_.adopt_loaded();
    if (start > plan_.total)
      throw ConfigError(cfg_.resume + ": checkpoint is at iteration " + std::to_string(start) + ", past this run's " +
                        std::to_string(plan_.total));
    return start;
  }

  // One training step; the lead records its time, its exposed wait and the synchronizer's blocks.
  void step(std::size_t it, std::size_t epoch, std::size_t index) {
    const auto it_start = Clock::now();
    const double wait_before = rank_.wait_seconds();
    if (cfg_.before_iteration) cfg_.before_iteration(r_, it);
    rank_.begin_iteration();
    loader_.batch(epoch, index, x_, y_);
    const auto [loss, ok] = rank_.step(x_, y_, cfg_.seed, it, plan_.schedule(it));
    ++done_in_run_;
    if (!lead_) return;
    result_.iteration_seconds.push_back(since(it_start));
    result_.iteration_wait_seconds.push_back(rank_.wait_seconds() - wait_before);
    const Statistics now = rank_.sync().statistics();
    const auto since_last = [&](std::string_view name) { return now.counter(name) - counted_.counter(name); };
    result_.iteration_blocks.push_back(
        {since_last("blocks important"), since_last("blocks best-effort"), since_last("blocks dropped")});  // DGT
    counted_ = now;
    loss_sum_ += loss;
    correct_ += double(ok);
    labels_ += double(y_.size());
    ++em_.iterations;
  }

  void progress(std::size_t it, std::size_t epoch) {
    const double elapsed = since(run_start_), rate = double(done_in_run_ * cfg_.batch * plan_.world) / elapsed;
    std::fprintf(stderr, "\repoch %zu/%zu  iter %zu/%zu  loss %.4f  acc %.3f  %.0f img/s  ETA %s   ", epoch + 1,
                 plan_.epochs, it + 1, plan_.total, loss_sum_ / double(em_.iterations), correct_ / labels_, rate,
                 clock_text(elapsed / double(done_in_run_) * double(plan_.total - it - 1)).c_str());
    last_print_ = Clock::now();
  }

  // Rank 0's replica on `test`; the other ranks carry on until they need its update.
  void evaluate_now(std::size_t it, const Dataset& test) {
    rank_.flush();
    const Evaluation ev = evaluate(rank_.model(), test, 500, rank_.mixed() != nullptr);
    const double trained = std::accumulate(result_.iteration_seconds.begin(), result_.iteration_seconds.end(), 0.0);
    result_.evaluations.push_back({it + 1, trained, ev.loss, ev.accuracy});
    result_.test_loss = ev.loss;
    result_.test_accuracy = ev.accuracy;
  }

  void end_epoch(std::size_t it, std::size_t epoch) {
    rank_.flush();
    em_.epoch = epoch + 1;
    em_.seconds = since(epoch_start_);
    train_seconds_ += em_.seconds;
    em_.train_loss = loss_sum_ / double(em_.iterations);
    em_.train_accuracy = correct_ / labels_;
    em_.images_per_second = double(em_.iterations * cfg_.batch * plan_.world) / em_.seconds;
    if (cfg_.evaluate) {
      evaluate_now(it, data_.test);
      em_.test_loss = result_.test_loss;
      em_.test_accuracy = result_.test_accuracy;
    }
    if (cfg_.progress)
      std::fprintf(stderr, "\repoch %zu/%zu  loss %.4f  train acc %.4f  test acc %.4f  %.0f img/s  %.1f s%20s\n",
                   em_.epoch, plan_.epochs, em_.train_loss, em_.train_accuracy, em_.test_accuracy,
                   em_.images_per_second, em_.seconds, "");
    result_.epochs.push_back(em_);
    em_ = EpochMetrics{};
    loss_sum_ = correct_ = labels_ = 0;
  }

  // Replicas must stay identical: one line per rank, compared by scripts (tests/faults).
  void print_digest() {
    std::size_t digest = 0;
    rank_.with_masters([&] {
      for (auto* p : rank_.model().params()) {
        const std::vector<float> v = p->value.to_host();
        const std::string_view bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
        digest = digest * 1099511628211u ^ std::hash<std::string_view>{}(bytes);
      }
    });
    std::printf("gradsync-train: rank %zu weights digest %016zx\n", r_, digest);
    std::fflush(stdout);
  }

  void finish() {
    result_.iterations = done_in_run_;
    result_.seconds = since(run_start_);
    result_.sync_wait_seconds = rank_.wait_seconds();
    result_.images_per_second =
        train_seconds_ > 0 ? double(done_in_run_ * cfg_.batch * plan_.world) / train_seconds_ : 0;
    rank_.with_masters([&] {
      for (auto* p : rank_.model().params()) result_.weights.push_back(p->value.to_host());
    });
    if (const MixedPrecision* m = rank_.mixed()) {
      result_.skipped_steps = m->scaler().skipped_steps();
      result_.loss_scale = m->scaler().scale();
    }
  }

  const TrainConfig& cfg_;
  const Datasets& data_;
  const Plan& plan_;
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

}  // namespace

TrainResult train(const TrainConfig& cfg, SyncFactory make_sync) {
  if (cfg.ranks == 0) throw ConfigError("--ranks must be at least 1");
  if (cfg.threads < 1) throw ConfigError("--threads must be at least 1");
  if (cfg.epochs == 0 && cfg.iterations == 0) throw ConfigError("need --epochs or --iterations > 0");
  if (cfg.precision != "fp32" && cfg.precision != "mixed")
    throw ConfigError("unknown precision '" + cfg.precision + "' (valid: fp32, mixed)");
  make_model(cfg.model);  // validate the model before loading data
  const Datasets data = [&] {
    Datasets d = load_data(cfg);
    if (cfg.evaluate_samples && cfg.evaluate_samples < d.test.size()) {
      Dataset copy = d.test;
      d.test_sample = split_tail(copy, cfg.evaluate_samples);
    }
    return d;
  }();

  if (cfg.world > cfg.ranks && !make_sync)
    throw ConfigError("a job spanning processes (MPI) needs the library synchronizer (--sync library)");
  std::unique_ptr<LocalAllReduceGroup> group;
  if (!make_sync) {
    if (cfg.ranks == 1) {
      make_sync = [](std::size_t, const Model&) { return std::make_unique<SingleRankSync>(); };
    } else {
      std::vector<std::size_t> sizes;
      for (auto& [name, n] : make_model(cfg.model)->layout()) sizes.push_back(n);
      group = std::make_unique<LocalAllReduceGroup>(cfg.ranks, sizes);
      make_sync = [&](std::size_t r, const Model&) { return group->rank(r); };
    }
  }

  // Shared plan, identical on every rank.
  const std::size_t world = cfg.world ? cfg.world : cfg.ranks;
  if (cfg.first_rank + cfg.ranks > world) throw ConfigError("ranks beyond the job's world size");
  const std::size_t bpe = ShardedLoader(data.train, cfg.batch, 0, world, cfg.seed).batches_per_epoch();
  const std::size_t total = cfg.iterations ? cfg.iterations : cfg.epochs * bpe;
  const Plan plan{world, bpe, total, (total + bpe - 1) / bpe,
                  LrSchedule(cfg.lr, cfg.lr_schedule, std::size_t(std::lround(cfg.warmup_epochs * double(bpe))), total)};
  const int threads_per_rank = std::max(1, cfg.threads / int(cfg.ranks));

  TrainResult result;
  std::mutex error_mutex;
  std::exception_ptr error;

  auto run_rank = [&](std::size_t local) {
    const std::size_t r = cfg.first_rank + local;  // global rank
    std::unique_ptr<Rank> rank_holder;  // outlives the try: a failing rank tells its peers first
    try {
      backend::set_threads(threads_per_rank);
      rank_holder = std::make_unique<Rank>(cfg, r, make_sync);
      RankLoop(cfg, data, plan, *rank_holder, r, result).run();
    } catch (...) {
      {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      if (rank_holder) rank_holder->sync().abort(what(std::current_exception()));
      if (group) group->abort();
    }
  };

  std::vector<std::thread> workers;
  for (std::size_t r = 0; r < cfg.ranks; ++r) workers.emplace_back(run_rank, r);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  return result;
}

}  // namespace gradsync::trainer
