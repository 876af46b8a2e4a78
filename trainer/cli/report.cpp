#include "cli/report.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace gradsync::trainer::cli {

void print_banner(const RunOptions& o) {
  const TrainConfig& c = o.train;
  const Policies& pol = o.policies;
  if (c.first_rank != 0) return;
  std::fprintf(stderr, "gradsync-train: %s x%.3g on %s, %zu rank(s)%s x batch %zu, %d thread(s), sync %s",
               c.model.name.c_str(), c.model.width, c.dataset.c_str(), c.world ? c.world : c.ranks, c.world ? " (MPI)" : "",
               c.batch, c.threads, pol.sync.c_str());
  if (pol.sync == "library")
    std::fprintf(stderr, " (%s, %s, %s, %s)", o.tune ? "tuned" : pol.slicing.c_str(), pol.priority.c_str(),
                 pol.codec.c_str(), o.tune ? "tuned" : pol.collective.c_str());
  std::fprintf(stderr, "\n");
}

namespace {

void print_summary(const RunOptions& o, const TrainResult& r, const gradsync::Statistics& st) {
  const TrainConfig& c = o.train;
  if (c.evaluate) std::printf("test accuracy %.4f  test loss %.4f  ", r.test_accuracy, r.test_loss);
  std::printf("%.0f images/s  %zu iterations in %.1f s  (%zu parameters)\n", r.images_per_second, r.iterations,
              r.seconds, r.parameters);
  if (c.precision == "mixed")
    std::printf("mixed precision: %llu step(s) skipped for overflow, final loss scale %g\n",
                static_cast<unsigned long long>(r.skipped_steps), double(r.loss_scale));
  if ((c.ranks > 1 || c.world > 1) && o.policies.sync == "library")
    std::printf("rank 0: %.2f s blocked in wait_for, %.1f MB sent; %s compressed %.1f%% of parameters, %.1f%% of bytes\n",
                r.sync_wait_seconds, double(st.bytes_sent) / 1e6, o.policies.codec.c_str(), 100 * st.compressed_share(),
                100 * st.compressed_bytes_share());
  if (st.counter("blocks important") + st.counter("blocks best-effort") > 0)
    std::printf("rank 0 (dgt): %llu blocks important, %llu unimportant (best-effort), %llu dropped (kept as residual), "
                "%llu datagrams rejected\n",
                (unsigned long long)st.counter("blocks important"), (unsigned long long)st.counter("blocks best-effort"),
                (unsigned long long)st.counter("blocks dropped"), (unsigned long long)st.counter("datagrams rejected"));
}

nlohmann::json tune_json(const gradsync::sim::Tuning& tuned, const std::vector<Retune>& retunes) {
  nlohmann::json j = {{"link_bytes_per_second", tuned.link.bytes_per_second},
                      {"link_latency_seconds", tuned.link.latency_seconds}, {"slicing", tuned.chosen.slicing},
                      {"collective", tuned.chosen.collective}, {"inflight_units", tuned.chosen.inflight_units},
                      {"credit_bytes", tuned.chosen.credit_bytes},
                      {"simulated_iteration_seconds", tuned.chosen.iteration_seconds},
                      {"simulated_default_seconds", tuned.default_seconds}, {"wall_seconds", tuned.wall_seconds},
                      {"compute_seconds", tuned.compute_seconds}};
  for (const Retune& re : retunes)
    j["retunes"].push_back({{"iteration", re.iteration}, {"link_bytes_per_second", re.bytes_per_second},
                            {"slicing", re.chosen.slicing}, {"collective", re.chosen.collective},
                            {"inflight_units", re.chosen.inflight_units},
                            {"credit_bytes", re.chosen.credit_bytes}, {"switched", re.switched},
                            {"cause", re.steady ? "compute" : "link"}, {"compute_seconds", re.compute_seconds}, {"cores", re.cores},
                            {"simulated_iteration_seconds", re.chosen.iteration_seconds}});
  return j;
}

nlohmann::json config_json(const TrainConfig& c, const Policies& pol) {
  return {{"model", c.model.name}, {"width", c.model.width}, {"input", c.model.input}, {"classes", c.model.classes},
          {"dataset", c.dataset}, {"batch_per_rank", c.batch}, {"epochs", c.epochs}, {"iterations", c.iterations},
          {"lr", c.lr}, {"lr_schedule", c.lr_schedule}, {"warmup_epochs", c.warmup_epochs},
          {"momentum", c.optimizer.momentum}, {"weight_decay", c.optimizer.weight_decay},
          {"lars", c.optimizer.lars}, {"lars_coefficient", c.optimizer.lars_coefficient}, {"seed", c.seed},
          {"precision", c.precision},
          {"ranks", c.ranks}, {"threads", c.threads},
          {"policies",
           {{"sync", pol.sync}, {"slicing", pol.slicing}, {"priority", pol.priority}, {"codec", pol.codec},
            {"collective", pol.collective}}}};
}

nlohmann::json sync_json(const TrainResult& r, const gradsync::Statistics& st) {
  return {{"rank0_exposed_wait_seconds", r.sync_wait_seconds}, {"rank0_bytes_sent", st.bytes_sent},
          {"rank0_units", st.units}, {"rank0_queued_seconds", st.queued_seconds},
          {"rank0_wire_seconds", st.wire_seconds}, {"rank0_elements", st.elements},
          {"rank0_elements_compressed", st.elements_compressed}, {"rank0_bytes_compressed", st.bytes_compressed},
          {"compressed_parameter_share", st.compressed_share()},
          {"compressed_byte_share", st.compressed_bytes_share()},
          {"rank0_blocks_important", st.counter("blocks important")},
          {"rank0_blocks_best_effort", st.counter("blocks best-effort")},
          {"rank0_blocks_dropped", st.counter("blocks dropped")},
          {"rank0_datagrams_rejected", st.counter("datagrams rejected")}};
}

}  // namespace

nlohmann::json metrics_json(const TrainConfig& c, const Policies& pol, const TrainResult& r, const Rank0Report& rank0) {
  // Without evaluation (--no-eval) there is no test loss or accuracy: null, not 0.
  const auto tested = [&](double v) { return c.evaluate ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : r.epochs)
    epochs.push_back({{"epoch", e.epoch}, {"iterations", e.iterations}, {"train_loss", e.train_loss},
                      {"train_accuracy", e.train_accuracy}, {"test_loss", tested(e.test_loss)},
                      {"test_accuracy", tested(e.test_accuracy)}, {"seconds", e.seconds},
                      {"images_per_second", e.images_per_second}});
  nlohmann::json evaluations = nlohmann::json::array();
  for (const auto& e : r.evaluations)
    evaluations.push_back({{"iteration", e.iteration}, {"train_seconds", e.train_seconds}, {"test_loss", e.test_loss},
                           {"test_accuracy", e.test_accuracy}});
  nlohmann::json j = {{"config", config_json(c, pol)},
                      {"parameters", r.parameters},
                      {"epochs", epochs},
                      {"iterations", r.iterations},
                      {"seconds", r.seconds},
                      {"images_per_second", r.images_per_second},
                      {"test_loss", tested(r.test_loss)},
                      {"test_accuracy", tested(r.test_accuracy)},
                      {"iteration_seconds", r.iteration_seconds},
                      {"iteration_wait_seconds", r.iteration_wait_seconds},
                      {"iteration_process_cpu_seconds", r.iteration_process_cpu_seconds},
                      {"first_iteration_unix", r.first_iteration_unix},
                      {"evaluations", evaluations},
                      {"iteration_blocks", r.iteration_blocks},  // [important, best effort, dropped] per iteration (DGT)
                      {"iteration_loss", r.iteration_loss},
                      {"skipped_steps", r.skipped_steps},
                      {"loss_scale", r.loss_scale},
                      {"sync", sync_json(r, rank0.stats)}};
  if (rank0.tuned) j["tune"] = tune_json(*rank0.tuned, rank0.retunes);
  return j;
}

void report(const RunOptions& o, const TrainResult& result, const Rank0Report& rank0) {
  print_summary(o, result, rank0.stats);
  if (o.metrics.empty()) return;
  Policies ran = o.policies;
  if (rank0.tuned) {
    ran.slicing = rank0.tuned->chosen.slicing;
    ran.collective = rank0.tuned->chosen.collective;
  }
  std::ofstream out(o.metrics);
  out << metrics_json(o.train, ran, result, rank0).dump(2) << "\n";
  if (!out) throw std::runtime_error(o.metrics + ": cannot write metrics");
}

}  // namespace gradsync::trainer::cli
