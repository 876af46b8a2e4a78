#include "cli/tuning.hpp"

#include <cstdio>
#include <string>
#include <string_view>

#include <gradsync/sim/models.hpp>
#include <gradsync/sim/profile_json.hpp>

#include "gradsync/trainer/retune.hpp"

namespace gradsync::trainer::cli {

namespace {

/// Whether the simulator has a built-in profile of this model (width 1 only).
bool has_builtin_profile(const TrainConfig& c) {
  return c.model.width == 1 && gradsync::sim::builtin_profiles.find(c.model.name) != std::string_view::npos;
}

/// --tune's model profile: a measured one (--tune-profile, written by --profile), else the
/// simulator's estimate for the model when it has one.
gradsync::sim::Profile tune_profile(const std::string& path, const TrainConfig& c) {
  if (!path.empty()) return gradsync::sim::read_profile(path);
  gradsync::sim::Estimate e;
  e.batch = c.batch;
  e.classes = c.model.classes;
  if (c.model.input.size() == 3) std::ranges::copy(c.model.input, e.input.begin());
  if (!has_builtin_profile(c))
    throw gradsync::ConfigError("--tune has no built-in profile of " + c.model.name + (c.model.width != 1 ? " at this --width" : "") +
                                ": write one with --profile FILE (a short run), then give --tune-profile FILE");
  return gradsync::sim::builtin_profile(c.model.name, e);
}

}  // namespace

void choose_default_tuning([[maybe_unused]] RunOptions& o) {
#if !defined(GRADSYNC_TRAINER_CUDA)  // (the built-in profiles are host compute)
  // No --slicing: the choice per link where the tuner can make it. 40,000-element slices cost
  // more CPU than DDP's buckets on fast links, and coarser units lose on slow ones.
  if (!o.was_given("--slicing") && o.policies.sync == "library" && o.train.world > 1 && !o.was_given("--collective") &&
      !o.was_given("--inflight") && !o.was_given("--credit") &&
      (has_builtin_profile(o.train) || !o.tune_profile_path.empty()))
    o.tune = true;
#endif
}

std::optional<TunePlan> plan_tuning(const RunOptions& o, const gradsync::AnySynchronizer::Policies& policies) {
  const Policies& pol = o.policies;
  // A Synchronizer whose state belongs to its units cannot be replaced: it keeps the start-up choice.
  const bool keeps_state = policies.codec.traits().needs_residual || policies.collective.traits().holds_back;
  const bool steady = o.tune_steady && !keeps_state;
  std::optional<TunePlan> plan;
  if (o.tune) {
    for (const char* chosen : {"--slicing", "--collective", "--inflight", "--credit"})
      if (o.was_given(chosen) && !(o.slicing_auto && chosen == std::string_view("--slicing")))
        throw gradsync::ConfigError(std::string("--tune chooses ") + chosen +
                                    ": drop it (limit the collectives with --tune-collectives)");
    for (const std::string& coll : o.tune_collectives)
      gradsync::collective::check_accepts(
          gradsync::AnySynchronizer::parse({pol.slicing, pol.priority, pol.codec, coll}).collective, policies.codec);
    plan = TunePlan{.profile = tune_profile(o.tune_profile_path, o.train),
                    .space = {.collectives = o.tune_collectives, .priority = pol.priority, .codec = pol.codec},
                    .retune_every = o.retune_every,
                    .steady_after = steady ? o.tune_steady : 0};
  } else if (!o.tune_profile_path.empty() || o.was_given("--tune-collectives") || o.retune_every ||
             o.was_given("--tune-steady")) {
    throw gradsync::ConfigError("--tune-profile, --tune-collectives, --tune-steady and --retune-every go with --tune");
  }
  if (keeps_state && (o.retune_every || (o.was_given("--tune-steady") && o.tune_steady)))
    throw gradsync::ConfigError(std::string(o.retune_every ? "--retune-every" : "--tune-steady") +
                                " replaces the Synchronizer, whose error-feedback residuals (--codec " + pol.codec +
                                ", --collective " + pol.collective +
                                ") belong to its units: use a codec without (fp32, fp16, bf16, qsgd...) and no dgt");
  return plan;
}

std::unique_ptr<GradientSync> tuned_sync(gradsync::transport::Transport& transport, std::size_t rank,
                                         std::size_t tensors, const TunePlan& plan, const BuildSync& build,
                                         gradsync::Statistics* stats, Rank0Report& rank0,
                                         const LayerProfiler* profiler, const std::string& model) {
  // Every rank at once: rank 0 measures the link with rank 1, tunes, and tells the others.
  const auto t = gradsync::sim::tune_on_link(transport, plan.profile, plan.space);
  if (rank == 0) {
    std::fprintf(stderr,
                 "gradsync-train: --tune: link %.3g Gbit/s, %.0f us measured; chose --slicing %s --collective %s "
                 "--inflight %zu --credit %zu (simulated %.3f s/iteration, P3's default %.3f s; %.2f s)\n",
                 t.link.bytes_per_second * 8 / 1e9, t.link.latency_seconds * 1e6, t.chosen.slicing.c_str(),
                 t.chosen.collective.c_str(), t.chosen.inflight_units, t.chosen.credit_bytes >> 20,
                 t.chosen.iteration_seconds, t.default_seconds, t.wall_seconds);
    rank0.tuned = t;
  }
  RetunePlan retune{.every = plan.retune_every, .steady_after = plan.steady_after};
  if (rank == 0 && profiler)
    retune.measured = [profiler, model](std::size_t finished) { return profiler->profile(model, finished); };
  if (transport.size() == 1 || (!retune.every && !retune.steady_after)) return build(&t.chosen, nullptr, stats);
  return std::make_unique<RetuningSync>(
      transport, tensors, t, plan.profile, plan.space, std::move(retune),
      [build](const gradsync::sim::Setting& s, gradsync::sim::LinkMeter& meter) { return build(&s, &meter, nullptr); },
      rank == 0 ? &rank0.retunes : nullptr, stats);
}

}  // namespace gradsync::trainer::cli
