#include "rank_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <string_view>

#include <gradsync/core/error.hpp>

#include "gradsync/trainer/cpu_time.hpp"

namespace gradsync::trainer {

namespace {

std::string clock_text(double s) {
  char buf[32];
  const long t = long(s + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace

RankLoop::RankLoop(const TrainConfig& cfg, const Datasets& data, const IterationPlan& plan, Rank& rank, std::size_t r,
                   TrainResult& result)
    : cfg_(cfg), data_(data), plan_(plan), rank_(rank), r_(r), lead_(r == 0), result_(result),
      loader_(data.train, cfg.batch, r, plan.world, cfg.seed) {}

void RankLoop::run() {
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

std::size_t RankLoop::resume() {
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

void RankLoop::step(std::size_t it, std::size_t epoch, std::size_t index) {
  const auto it_start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  const double wait_before = rank_.wait_seconds();
  if (cfg_.before_iteration) cfg_.before_iteration(r_, it);
  rank_.begin_iteration();
  loader_.batch(epoch, index, x_, y_);
  const auto [loss, ok] = rank_.step(x_, y_, cfg_.seed, it, plan_.schedule(it));
  ++done_in_run_;
  if (!lead_) return;
  result_.iteration_seconds.push_back(since(it_start));
  result_.iteration_wait_seconds.push_back(rank_.wait_seconds() - wait_before);
  result_.iteration_process_cpu_seconds.push_back(process_cpu_seconds() - cpu_start);
  const Statistics now = rank_.sync().statistics();
  const auto since_last = [&](std::string_view name) { return now.counter(name) - counted_.counter(name); };
  result_.iteration_blocks.push_back(
      {since_last("blocks important"), since_last("blocks best-effort"), since_last("blocks dropped")});  // DGT
  counted_ = now;
  result_.iteration_loss.push_back(loss);
  loss_sum_ += loss;
  correct_ += double(ok);
  labels_ += double(y_.size());
  ++em_.iterations;
}

void RankLoop::progress(std::size_t it, std::size_t epoch) {
  const double elapsed = since(run_start_), rate = double(done_in_run_ * cfg_.batch * plan_.world) / elapsed;
  std::fprintf(stderr, "\repoch %zu/%zu  iter %zu/%zu  loss %.4f  acc %.3f  %.0f img/s  ETA %s   ", epoch + 1,
               plan_.epochs, it + 1, plan_.total, loss_sum_ / double(em_.iterations), correct_ / labels_, rate,
               clock_text(elapsed / double(done_in_run_) * double(plan_.total - it - 1)).c_str());
  last_print_ = Clock::now();
}

void RankLoop::evaluate_now(std::size_t it, const Dataset& test) {
  rank_.flush();
  const Evaluation ev = evaluate(rank_.model(), test, 500, rank_.mixed() != nullptr);
  const double trained = std::accumulate(result_.iteration_seconds.begin(), result_.iteration_seconds.end(), 0.0);
  result_.evaluations.push_back({it + 1, trained, ev.loss, ev.accuracy});
  result_.test_loss = ev.loss;
  result_.test_accuracy = ev.accuracy;
}

void RankLoop::end_epoch(std::size_t it, std::size_t epoch) {
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

void RankLoop::print_digest() {
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

void RankLoop::finish() {
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

}  // namespace gradsync::trainer
