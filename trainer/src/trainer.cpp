// train() and evaluate(): the ranks as threads of this process, each a Rank (rank.hpp) running a
// RankLoop (rank_loop.hpp) over the run's data (datasets.hpp).
#include "gradsync/trainer/trainer.hpp"
#include <gradsync/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "datasets.hpp"
#include "gradsync/trainer/backend.hpp"
#include "rank.hpp"
#include "rank_loop.hpp"

namespace gradsync::trainer {

namespace {

std::string what(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
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

TrainResult train(const TrainConfig& cfg, SyncFactory make_sync) {
  if (cfg.ranks == 0) throw ConfigError("--ranks must be at least 1");
  if (cfg.threads < 1) throw ConfigError("--threads must be at least 1");
  if (cfg.epochs == 0 && cfg.iterations == 0) throw ConfigError("need --epochs or --iterations > 0");
  if (cfg.precision != "fp32" && cfg.precision != "mixed")
    throw ConfigError("unknown precision '" + cfg.precision + "' (valid: fp32, mixed)");
  make_model(cfg.model);  // validate the model before loading data
  const Datasets data = load_datasets(cfg);

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
  const IterationPlan plan{world, bpe, total, (total + bpe - 1) / bpe,
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
