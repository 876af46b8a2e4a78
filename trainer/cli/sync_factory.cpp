#include "cli/sync_factory.hpp"

#include <string>

#include <gradsync/any_synchronizer.hpp>

#include "cli/tuning.hpp"
#include "gradsync/trainer/library_sync.hpp"
#if defined(GRADSYNC_TRAINER_CUDA)
#include "device_sync.hpp"
#endif

namespace gradsync::trainer::cli {

namespace {

/// The library's options as the flags set them.
gradsync::Options library_options(const RunOptions& o) {
  gradsync::Options opt;
  opt.timeout = o.patience();
  if (o.train.precision == "mixed") {
    // Overflowed (Inf) gradients must reach every rank so that all skip the same step.
    opt.check_finite = false;
    const std::string codec = o.policies.codec.substr(0, o.policies.codec.find(':'));
    if (codec != "fp32" && codec != "fp16" && codec != "bf16")
      throw gradsync::ConfigError("--precision mixed needs a codec that carries Inf/NaN to every rank (fp32, fp16 "
                                  "or bf16) so all ranks skip an overflowed step; got --codec " + o.policies.codec);
  }
  opt.seed = o.train.seed;
  if (o.inflight > 0) opt.inflight_units = o.inflight;
  if (o.credit_mb > 0) opt.credit_bytes = static_cast<std::size_t>(o.credit_mb * 1024 * 1024);
  return opt;
}

/// Records each unit's time queued and on the wire in `trace` (when given) as rank `rank`'s, and
/// feeds `meter` (when given).
std::function<void(const gradsync::UnitEvent&)> unit_observer(Trace* trace, std::size_t rank,
                                                              gradsync::sim::LinkMeter* meter) {
  return [trace, rank, meter](const gradsync::UnitEvent& e) {
    if (meter) meter->add(e);
    if (!trace) return;
    std::string name = "unit " + std::to_string(e.unit);
    gradsync::Statistics unit{.counters = e.counters};  // DGT: blocks sent each way
    if (const auto important = unit.counter("blocks important"), best_effort = unit.counter("blocks best-effort");
        important + best_effort > 0)
      name += " (" + std::to_string(important) + " important, " + std::to_string(best_effort) + " best effort, " +
              std::to_string(unit.counter("blocks dropped")) + " dropped)";
    trace->span(name, rank, Trace::queued, e.ready, e.started);
    trace->span(name, rank, Trace::wire, e.started, e.finished);
  };
}

/// One rank's synchronizer of the flags' setting or a tuned one (a BuildSync). A value: a
/// re-tuning rank keeps a copy to build each new synchronizer with.
struct RankSyncBuilder {
  gradsync::transport::Transport* transport;
  const Model* model;
  Trace* trace;  ///< null: not traced
  std::size_t rank;
  gradsync::Options options;
  gradsync::AnySynchronizer::Policies policies;
  Policies names;

  std::unique_ptr<GradientSync> operator()(const gradsync::sim::Setting* setting, gradsync::sim::LinkMeter* meter,
                                           gradsync::Statistics* stats) const {
    gradsync::Options o = options;
    auto chosen = policies;
    if (setting) {
      o.inflight_units = setting->inflight_units;
      o.credit_bytes = setting->credit_bytes;
      chosen = gradsync::AnySynchronizer::parse({setting->slicing, names.priority, names.codec, setting->collective});
    }
    if (meter || trace) o.on_unit = unit_observer(trace, rank, meter);
#if defined(GRADSYNC_TRAINER_CUDA)  // gradients stay on the GPU where the policies allow
    return make_device_sync(*transport, *model, o, chosen, stats);
#else
    return std::make_unique<SynchronizerHook<gradsync::AnySynchronizer>>(*transport, *model, o, chosen, stats);
#endif
  }
};

/// Rank r's library synchronizer: the flags' setting, or --tune's.
struct LibrarySyncFactory {
  const RunOptions* run;
  Ranks* ranks;
  Rank0Report* rank0;
  gradsync::Options options;
  gradsync::AnySynchronizer::Policies policies;
  std::optional<TunePlan> tuning;

  std::unique_ptr<GradientSync> operator()(std::size_t r, const Model& model) const {
    gradsync::transport::Transport& transport = ranks->transport(r - run->train.first_rank);
    const RankSyncBuilder build{&transport, &model, run->train.trace, r, options, policies, run->policies};
    gradsync::Statistics* stats = r == 0 ? &rank0->stats : nullptr;
    if (!tuning) return build(nullptr, nullptr, stats);
    return tuned_sync(transport, r, model.params().size(), *tuning, build, stats, *rank0,
                      r == 0 ? run->train.profiler : nullptr, run->train.model.name);
  }
};

}  // namespace

SyncFactory make_sync_factory(const RunOptions& o, Ranks& ranks, Rank0Report& rank0) {
  const Policies& pol = o.policies;
  if (pol.sync != "library") {
    if (!o.bandwidth.empty() || o.tune)
      throw gradsync::ConfigError(std::string(o.tune ? "--tune" : "--bandwidth") +
                                  " works on the library's synchronizer: use it with --sync library");
    return {};  // the trainer's exact local all-reduce (or nothing, for one rank)
  }
  gradsync::Options options = library_options(o);
  auto policies = gradsync::AnySynchronizer::parse({pol.slicing, pol.priority, pol.codec, pol.collective});
  gradsync::collective::check_accepts(policies.collective, policies.codec);
  std::optional<TunePlan> tuning = plan_tuning(o, policies);
  return LibrarySyncFactory{&o, &ranks, &rank0, std::move(options), std::move(policies), std::move(tuning)};
}

}  // namespace gradsync::trainer::cli
