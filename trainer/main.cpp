// gradsync-train: trains one of the trainer's models data-parallel over in-process ranks.
// With no arguments: the default below on Fashion-MNIST (see `defaults()`).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include <optional>

#include <gradsync/sim/models.hpp>
#include <gradsync/sim/profile_json.hpp>
#include <gradsync/transport/in_process.hpp>
#include <gradsync/transport/throttled.hpp>
#if defined(GRADSYNC_WITH_MPI)
#include <gradsync/transport/mpi.hpp>
#include <gradsync/transport/mpi_session.hpp>
#endif
#if defined(GRADSYNC_WITH_NCCL)
#include <gradsync/transport/nccl.hpp>
#endif
#if defined(GRADSYNC_TRAINER_CUDA)
#include "device_sync.hpp"
#endif

#include "gradsync/trainer/library_sync.hpp"
#include "gradsync/trainer/retune.hpp"
#include "gradsync/trainer/trainer.hpp"

using namespace gradsync::trainer;

namespace {

// The `make run` default: AlexNet-BN at 1/8 width, 4 in-process ranks x 16 = 64 images per step,
// 3 epochs, P3 policies; measured figures in trainer/README.md.
TrainConfig defaults() {
  TrainConfig c;
  c.model = {.name = "alexnet-bn", .width = 0.125, .input = {1, 28, 28}, .classes = 10};
  c.batch = 16;
  c.epochs = 3;
  c.lr = 0.05f;
  c.lr_schedule = "cosine";
  c.warmup_epochs = 0.2;
  c.ranks = 4;
  return c;
}

Shape parse_shape(const std::string& text) {
  Shape s;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t x = text.find('x', at);
    const std::string part = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw CLI::ValidationError("--input", "expected CxHxW such as 3x32x32, got '" + text + "'");
    s.push_back(std::stoul(part));
    if (x == std::string::npos) break;
    at = x + 1;
  }
  return s;
}

struct Policies {
  std::string sync = "library";  ///< library: gradsync::AnySynchronizer; local: the exact reference all-reduce
  std::string slicing = "fixed:40000", priority = "forward", codec = "fp32", collective = "ring";
};

nlohmann::json metrics_json(const TrainConfig& c, const Policies& pol, const TrainResult& r,
                            const gradsync::Statistics& st) {
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
  return {{"config",
           {{"model", c.model.name}, {"width", c.model.width}, {"input", c.model.input}, {"classes", c.model.classes},
            {"dataset", c.dataset}, {"batch_per_rank", c.batch}, {"epochs", c.epochs}, {"iterations", c.iterations},
            {"lr", c.lr}, {"lr_schedule", c.lr_schedule}, {"warmup_epochs", c.warmup_epochs},
            {"momentum", c.optimizer.momentum}, {"weight_decay", c.optimizer.weight_decay},
            {"lars", c.optimizer.lars}, {"lars_coefficient", c.optimizer.lars_coefficient}, {"seed", c.seed},
            {"precision", c.precision},
            {"ranks", c.ranks}, {"threads", c.threads},
            {"policies",
             {{"sync", pol.sync}, {"slicing", pol.slicing}, {"priority", pol.priority}, {"codec", pol.codec},
              {"collective", pol.collective}}}}},
          {"parameters", r.parameters},
          {"epochs", epochs},
          {"iterations", r.iterations},
          {"seconds", r.seconds},
          {"images_per_second", r.images_per_second},
          {"test_loss", tested(r.test_loss)},
          {"test_accuracy", tested(r.test_accuracy)},
          {"iteration_seconds", r.iteration_seconds},
          {"iteration_wait_seconds", r.iteration_wait_seconds},
          {"first_iteration_unix", r.first_iteration_unix},
          {"evaluations", evaluations},
          {"iteration_blocks", r.iteration_blocks},  // [important, best effort, dropped] per iteration (DGT)
          {"skipped_steps", r.skipped_steps},
          {"loss_scale", r.loss_scale},
          {"sync",
           {{"rank0_exposed_wait_seconds", r.sync_wait_seconds}, {"rank0_bytes_sent", st.bytes_sent},
            {"rank0_units", st.units}, {"rank0_queued_seconds", st.queued_seconds},
            {"rank0_wire_seconds", st.wire_seconds}, {"rank0_elements", st.elements},
            {"rank0_elements_compressed", st.elements_compressed}, {"rank0_bytes_compressed", st.bytes_compressed},
            {"compressed_parameter_share", st.compressed_share()},
            {"compressed_byte_share", st.compressed_bytes_share()},
            {"rank0_blocks_important", st.counter("blocks important")},
            {"rank0_blocks_best_effort", st.counter("blocks best-effort")},
            {"rank0_blocks_dropped", st.counter("blocks dropped")},
            {"rank0_datagrams_rejected", st.counter("datagrams rejected")}}}};
}

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

int main(int argc, char** argv) {
  TrainConfig c = defaults();
  Policies pol;
  std::string input, metrics, trace_path, bandwidth, profile_path, tune_profile_path;
  bool quiet = false, no_eval = false, tune = false;
  std::pair<std::size_t, std::size_t> inject_nan;
  std::pair<std::size_t, std::string> bandwidth_change;
  std::size_t retune_every = 0;
  std::vector<std::string> tune_collectives{"ring"};
  unsigned inflight = 0;
  double credit_mb = 0;
  double timeout_s = 600;

  CLI::App app{"gradsync-train: data-parallel training on in-process ranks with the gradsync hooks"};
  app.add_option("--model", c.model.name, "Model")->check(CLI::IsMember(model_names()))->capture_default_str();
  app.add_option("--width", c.model.width, "Width multiplier (channels, hidden sizes)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dataset", c.dataset, "fashion-mnist or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "synthetic"}))->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "Fashion-MNIST directory (gzipped IDX)")->capture_default_str();
  app.add_option("--input", input, "Synthetic sample shape CxHxW (default 1x28x28), or T for lstm-lm (default 32)");
  app.add_option("--classes", c.model.classes, "Classes, or vocabulary for lstm-lm (synthetic)")
      ->check(CLI::Range(2, 1 << 24));
  app.add_option("--synthetic-size", c.synthetic_train, "Synthetic training samples")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "Batch size per rank")->check(CLI::PositiveNumber)->capture_default_str();
  auto* epochs = app.add_option("--epochs", c.epochs, "Epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--iterations", c.iterations, "Iterations (instead of epochs)")
      ->check(CLI::PositiveNumber)->excludes(epochs);
  app.add_option("--lr", c.lr, "Base learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", c.optimizer.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999))->capture_default_str();
  app.add_option("--wd", c.optimizer.weight_decay, "Weight decay (not on biases and batch norm)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--lars", c.optimizer.lars, "Layer-wise adaptive rate scaling");
  app.add_option("--lars-coefficient", c.optimizer.lars_coefficient, "LARS eta")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr-schedule", c.lr_schedule, "Decay after warm-up")->check(CLI::IsMember(LrSchedule::kinds()))
      ->capture_default_str();
  app.add_option("--warmup", c.warmup_epochs, "Linear warm-up, in epochs")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--precision", c.precision,
                 "mixed: fp16 weights/activations/gradients with fp32 accumulation and master weights, dynamic loss scaling")
      ->check(CLI::IsMember({"fp32", "mixed"}))->capture_default_str();
  app.add_option("--loss-scale", c.loss_scaling.initial_scale, "Initial loss scale (mixed)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--loss-scale-window", c.loss_scaling.growth_interval, "Clean steps before the loss scale doubles (mixed)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", c.seed, "Seed for weights, data order, dropout")->capture_default_str();
  app.add_option("--ranks", c.ranks, "In-process ranks (threads, one replica each)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--threads", c.threads, "Compute threads in all")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--sync", pol.sync, "library (gradsync::AnySynchronizer) or local (exact reference all-reduce)")
      ->check(CLI::IsMember({"library", "local"}))->capture_default_str();
  // Each family's grammar is the one its parse errors list (gradsync::*::Any*::grammar).
  app.add_option("--slicing", pol.slicing,
                 "Synchronizer slicing policy: " + std::string(gradsync::slicing::AnySlicing::grammar) +
                     "; auto: --tune. Without --slicing: auto under mpirun where --tune can run (vgg11 or resnet20 at "
                     "width 1, or --tune-profile; no --collective, --inflight or --credit; host builds), else fixed:40000");
  app.add_option("--priority", pol.priority,
                 "Synchronizer priority policy: " + std::string(gradsync::priority::AnyPriority::grammar))
      ->capture_default_str();
  app.add_option("--codec", pol.codec, "Synchronizer codec: " + std::string(gradsync::codec::AnyCodec::grammar))
      ->capture_default_str();
  app.add_option("--collective", pol.collective,
                 "Synchronizer collective: " + std::string(gradsync::collective::AnyCollective::grammar))
      ->capture_default_str();
  app.add_option("--inflight", inflight, "Units whose collectives progress at once (Options::inflight_units; 0: the library's default)")
      ->check(CLI::Range(0, 64));
  app.add_option("--credit", credit_mb, "MiB of fp32 units on the wire at once (Options::credit_bytes; 0: the library's default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--metrics", metrics, "Write metrics JSON here");
  app.add_option("--trace", trace_path, "Write a Chrome trace (open in Perfetto): per-layer compute, per-unit queue and wire");
  app.add_option("--profile", profile_path,
                 "Write rank 0's per-layer compute times (medians after 2 warm-up iterations) and tensor sizes: "
                 "a gradsync-sim profile (tools/sim/README.md)");
  app.add_flag("--tune", tune,
               "Choose --slicing, --inflight, --credit and --collective with gradsync's simulator, for the link "
               "measured between ranks 0 and 1 at start (tools/sim/README.md)");
  app.add_option("--tune-profile", tune_profile_path, "--tune: the model profile to simulate (written by --profile)")
      ->check(CLI::ExistingFile);
  app.add_option("--tune-collectives", tune_collectives, "--tune: the collectives it may choose")
      ->delimiter(',')->capture_default_str();
  app.add_option("--retune-every", retune_every,
                 "--tune: every N iterations re-read the link from the units' timings; when its rate moved by a factor "
                 "1.5 two windows in a row, tune again and switch every rank at once (codecs without error feedback)")
      ->check(CLI::PositiveNumber);
  app.add_option("--bandwidth", bandwidth, "Emulate links of this speed per rank pair: 1gbit, 10gbit+50us, 1gbit/nic ...");
  app.add_option("--checkpoint", c.checkpoint, "Checkpoint file (written each epoch and at the end)");
  app.add_option("--checkpoint-every", c.checkpoint_every, "Also checkpoint every N iterations");
  app.add_option("--eval-every", c.evaluate_every, "Also evaluate every N iterations (time to accuracy in --metrics)")
      ->check(CLI::PositiveNumber);
  app.add_option("--eval-samples", c.evaluate_samples,
                 "The --eval-every evaluations on the last N test samples only (faster); epoch ends and the "
                 "run's end on the whole test set")
      ->check(CLI::PositiveNumber);
  app.add_option("--resume", c.resume, "Continue from this checkpoint")->check(CLI::ExistingFile);
  app.add_option("--stop-after", c.stop_after, "Stop after N iterations of this run (resume later)");
  app.add_option("--timeout", timeout_s,
                 "Seconds any wait for a peer may last before the run fails naming that peer (Options::timeout and "
                 "the transport's); ranks also wait this long for rank 0's evaluation and checkpoints")
      ->check(CLI::Range(0.1, 86400.0))->capture_default_str();
  app.add_flag("--no-eval", no_eval, "Skip test-set evaluation");
  app.add_flag("--quiet,-q", quiet, "No progress line");
  app.add_flag("--print-digest", c.print_digest, "At the end every rank prints a digest of its weights (replicas must agree)")
      ->group("Fault injection");
  auto* nan_option = app.add_option("--inject-nan", inject_nan,
                                    "RANK:ITERATION: that rank hands over a NaN gradient at that iteration (checks "
                                    "that every rank stops, or under --precision mixed skips the step)")
                         ->delimiter(':')->group("Fault injection");
  app.add_option("--bandwidth-change", bandwidth_change,
                 "ITERATION:LINK: from that iteration on, every rank's emulated links (--bandwidth) take LINK's rate and "
                 "latency (1gbit, 1gbit+5ms)")
      ->delimiter(':')->group("Fault injection");
  CLI11_PARSE(app, argc, argv);
  if (nan_option->count()) c.inject_nan = TrainConfig::InjectNan{inject_nan.first, inject_nan.second};
#if defined(GRADSYNC_WITH_MPI)
  // Under mpirun (or srun/PMI): one replica per process over gradsync's MPI transport.
  std::optional<gradsync::transport::MpiSession> mpi;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) mpi.emplace(argc, argv);
#endif

  c.progress = !quiet;
  c.evaluate = !no_eval;
  // --slicing auto is --tune, spelt so that Open MPI's processes, which read an argument --tune
  // as their own "--tune FILE", leave it alone.
  const bool slicing_auto = pol.slicing == "auto";
  if (slicing_auto) {
    tune = true;
    pol.slicing = Policies{}.slicing;
  }
  try {
    if (c.model.name == "lstm-lm") {
      c.model.input = {input.empty() ? 32 : parse_shape(input).at(0)};
      if (app.count("--classes") == 0) c.model.classes = 10000;
      if (app.count("--dataset") == 0) c.dataset = "synthetic";
    } else if (!input.empty()) {
      c.model.input = parse_shape(input);
    }
    if (c.dataset == "fashion-mnist" && c.model.name == "lstm-lm")
      throw gradsync::ConfigError("lstm-lm trains on synthetic tokens: use --dataset synthetic");
    // Ranks wait for rank 0 while it evaluates or checkpoints: the default allows minutes, not seconds.
    const std::chrono::milliseconds patience{static_cast<long long>(timeout_s * 1000)};
    gradsync::transport::InProcessGroup group(int(c.ranks), patience);
    std::vector<gradsync::transport::Transport*> transports;  // this process's ranks, local index
    for (int r = 0; r < int(c.ranks); ++r) transports.push_back(&group.rank(r));
#if defined(GRADSYNC_WITH_MPI)
    std::optional<gradsync::transport::Mpi> mpi_world;
    if (mpi) {
      mpi_world.emplace(MPI_COMM_WORLD, patience);
      if (app.count("--ranks")) throw gradsync::ConfigError("--ranks is for in-process ranks; under mpirun use -np");
      c.ranks = 1;
      c.world = std::size_t(mpi_world->size());
      c.first_rank = std::size_t(mpi_world->rank());
      c.progress = c.progress && c.first_rank == 0;
      transports = {&*mpi_world};
    }
#endif
#if !defined(GRADSYNC_TRAINER_CUDA)  // (the built-in profiles are host compute)
    // No --slicing: the choice per link where the tuner can make it. 40,000-element slices cost
    // more CPU than DDP's buckets on fast links, and coarser units lose on slow ones.
    if (!app.count("--slicing") && pol.sync == "library" && c.world > 1 && !app.count("--collective") &&
        !app.count("--inflight") && !app.count("--credit") && (has_builtin_profile(c) || !tune_profile_path.empty()))
      tune = true;
#endif
    if (c.first_rank == 0) {
      std::fprintf(stderr, "gradsync-train: %s x%.3g on %s, %zu rank(s)%s x batch %zu, %d thread(s), sync %s",
                   c.model.name.c_str(), c.model.width, c.dataset.c_str(), c.world ? c.world : c.ranks, c.world ? " (MPI)" : "", c.batch, c.threads,
                   pol.sync.c_str());
      if (pol.sync == "library")
        std::fprintf(stderr, " (%s, %s, %s, %s)", tune ? "tuned" : pol.slicing.c_str(), pol.priority.c_str(),
                     pol.codec.c_str(), tune ? "tuned" : pol.collective.c_str());
      std::fprintf(stderr, "\n");
    }
    std::vector<std::unique_ptr<gradsync::transport::Throttled<>>> links;
    if (!bandwidth.empty()) {
      const auto link = gradsync::transport::Link::parse(bandwidth);
      for (auto*& t : transports) t = links.emplace_back(std::make_unique<gradsync::transport::Throttled<>>(*t, link)).get();
    }
    if (app.count("--bandwidth-change")) {
      if (links.empty()) throw gradsync::ConfigError("--bandwidth-change changes the emulated links: add --bandwidth");
      const auto to = gradsync::transport::Link::parse(bandwidth_change.second);
      c.before_iteration = [&links, to, from = bandwidth_change.first, first = c.first_rank](std::size_t r,
                                                                                            std::size_t it) {
        if (it == from) links.at(r - first)->change(to);  // each rank its own sends
      };
    }
    Trace trace;
    if (!trace_path.empty()) c.trace = &trace;
    LayerProfiler profiler;
    if (!profile_path.empty()) c.profiler = &profiler;
    gradsync::Statistics rank0_stats;
    std::optional<gradsync::sim::Tuning> tuned;  // rank 0's --tune choice
    std::vector<Retune> retunes;  // rank 0's --retune-every re-tunes
#if defined(GRADSYNC_WITH_NCCL)
    // --collective nccl[-hierarchical]: NCCL's all-reduce needs a communicator per rank, on GPU 0
    // (CUDA_VISIBLE_DEVICES picks it), made over the rank's transport on the rank's own thread
    // (construction is collective); the other collectives need none.
    std::vector<std::unique_ptr<gradsync::transport::Nccl>> nccl(transports.size());
#endif
    auto rank_transport = [&](std::size_t local) -> gradsync::transport::Transport& {
#if defined(GRADSYNC_WITH_NCCL)
      if (pol.collective.starts_with("nccl"))
        return *(nccl.at(local) = std::make_unique<gradsync::transport::Nccl>(*transports.at(local), 0));
#endif
      return *transports.at(local);
    };
    SyncFactory factory;  // empty: the trainer's exact local all-reduce (or nothing, for one rank)
    if (pol.sync == "library") {
      gradsync::Options opt;
      opt.timeout = patience;
      if (c.precision == "mixed") {
        // Overflowed (Inf) gradients must reach every rank so that all skip the same step.
        opt.check_finite = false;
        const std::string codec = pol.codec.substr(0, pol.codec.find(':'));
        if (codec != "fp32" && codec != "fp16" && codec != "bf16")
          throw gradsync::ConfigError("--precision mixed needs a codec that carries Inf/NaN to every rank (fp32, fp16 "
                                      "or bf16) so all ranks skip an overflowed step; got --codec " + pol.codec);
      }
      opt.seed = c.seed;
      if (inflight > 0) opt.inflight_units = inflight;
      if (credit_mb > 0) opt.credit_bytes = static_cast<std::size_t>(credit_mb * 1024 * 1024);
      // Parsed and checked here, once, before any data loads or rank starts: a bad name fails at once.
      const auto policies =
          gradsync::AnySynchronizer::parse({pol.slicing, pol.priority, pol.codec, pol.collective});
      gradsync::collective::check_accepts(policies.collective, policies.codec);
      gradsync::sim::TuneSpace space{.collectives = tune_collectives, .priority = pol.priority, .codec = pol.codec};
      std::optional<gradsync::sim::Profile> profile;
      if (tune) {
        for (const char* chosen : {"--slicing", "--collective", "--inflight", "--credit"})
          if (app.count(chosen) && !(slicing_auto && chosen == std::string_view("--slicing")))
            throw gradsync::ConfigError(std::string("--tune chooses ") + chosen +
                                        ": drop it (limit the collectives with --tune-collectives)");
        for (const std::string& coll : tune_collectives)
          gradsync::collective::check_accepts(
              gradsync::AnySynchronizer::parse({pol.slicing, pol.priority, pol.codec, coll}).collective, policies.codec);
        profile = tune_profile(tune_profile_path, c);
      } else if (!tune_profile_path.empty() || app.count("--tune-collectives") || retune_every) {
        throw gradsync::ConfigError("--tune-profile, --tune-collectives and --retune-every go with --tune");
      }
      if (retune_every && (policies.codec.needs_residual() || gradsync::collective::holds_back(policies.collective)))
        throw gradsync::ConfigError("--retune-every replaces the Synchronizer, whose error-feedback residuals (--codec " +
                                    pol.codec + ", --collective " + pol.collective +
                                    ") belong to its units: use a codec without (fp32, fp16, bf16, qsgd...) and no dgt");
      factory = [&, opt, policies, space, profile](std::size_t r, const Model& model) -> std::unique_ptr<GradientSync> {
        gradsync::transport::Transport& transport = rank_transport(r - c.first_rank);
        // A Synchronizer of `setting` (the flags' own without --tune), feeding `meter` under --retune-every.
        auto build = [&, r, opt, policies](const gradsync::sim::Setting* setting, gradsync::sim::LinkMeter* meter,
                                           gradsync::Statistics* report) {
          gradsync::Options o = opt;
          auto chosen = policies;
          if (setting) {
            o.inflight_units = setting->inflight_units;
            o.credit_bytes = setting->credit_bytes;
            chosen = gradsync::AnySynchronizer::parse({setting->slicing, pol.priority, pol.codec, setting->collective});
          }
          if (meter || c.trace) o.on_unit = [&trace, r, meter, traced = c.trace != nullptr](const gradsync::UnitEvent& e) {
            if (meter) meter->add(e);
            if (!traced) return;
            std::string name = "unit " + std::to_string(e.unit);
            gradsync::Statistics unit{.counters = e.counters};  // DGT: blocks sent each way
            if (const auto important = unit.counter("blocks important"), best_effort = unit.counter("blocks best-effort");
                important + best_effort > 0)
              name += " (" + std::to_string(important) + " important, " + std::to_string(best_effort) + " best effort, " +
                      std::to_string(unit.counter("blocks dropped")) + " dropped)";
            trace.span(name, r, Trace::queued, e.ready, e.started);
            trace.span(name, r, Trace::wire, e.started, e.finished);
          };
#if defined(GRADSYNC_TRAINER_CUDA)  // gradients stay on the GPU where the policies allow
          return make_device_sync(transport, model, o, chosen, report);
#else
          return std::make_unique<SynchronizerHook<gradsync::AnySynchronizer>>(transport, model, o, chosen, report);
#endif
        };
        gradsync::Statistics* report = r == 0 ? &rank0_stats : nullptr;
        if (!profile) return build(nullptr, nullptr, report);
        // Every rank at once: rank 0 measures the link with rank 1, tunes, and tells the others.
        const auto t = gradsync::sim::tune_on_link(transport, *profile, space);
        if (r == 0) {
          std::fprintf(stderr,
                       "gradsync-train: --tune: link %.3g Gbit/s, %.0f us measured; chose --slicing %s --collective %s "
                       "--inflight %zu --credit %zu (simulated %.3f s/iteration, P3's default %.3f s; %.2f s)\n",
                       t.link.bytes_per_second * 8 / 1e9, t.link.latency_seconds * 1e6, t.chosen.slicing.c_str(),
                       t.chosen.collective.c_str(), t.chosen.inflight_units, t.chosen.credit_bytes >> 20,
                       t.chosen.iteration_seconds, t.default_seconds, t.wall_seconds);
          tuned = t;
        }
        if (!retune_every) return build(&t.chosen, nullptr, report);
        return std::make_unique<RetuningSync>(
            transport, model.params().size(), t, *profile, space, retune_every,
            [build](const gradsync::sim::Setting& s, gradsync::sim::LinkMeter& meter) { return build(&s, &meter, nullptr); },
            r == 0 ? &retunes : nullptr, report);
      };
    } else if (!bandwidth.empty() || tune) {
      throw gradsync::ConfigError(std::string(tune ? "--tune" : "--bandwidth") +
                                  " works on the library's synchronizer: use it with --sync library");
    }
    const TrainResult r = train(c, factory);
    if (!trace_path.empty()) trace.write(c.first_rank == 0 ? trace_path : trace_path + ".rank" + std::to_string(c.first_rank));
    if (c.first_rank != 0) return 0;  // rank 0 of an MPI job reports
    if (!profile_path.empty()) profiler.write(profile_path, c.model.name);
    if (tuned) {
      pol.slicing = tuned->chosen.slicing;
      pol.collective = tuned->chosen.collective;
    }
    if (c.evaluate) std::printf("test accuracy %.4f  test loss %.4f  ", r.test_accuracy, r.test_loss);
    std::printf("%.0f images/s  %zu iterations in %.1f s  (%zu parameters)\n", r.images_per_second, r.iterations,
                r.seconds, r.parameters);
    if (c.precision == "mixed")
      std::printf("mixed precision: %llu step(s) skipped for overflow, final loss scale %g\n",
                  static_cast<unsigned long long>(r.skipped_steps), double(r.loss_scale));
    if ((c.ranks > 1 || c.world > 1) && pol.sync == "library")
      std::printf("rank 0: %.2f s blocked in wait_for, %.1f MB sent; %s compressed %.1f%% of parameters, %.1f%% of bytes\n",
                  r.sync_wait_seconds, double(rank0_stats.bytes_sent) / 1e6, pol.codec.c_str(),
                  100 * rank0_stats.compressed_share(), 100 * rank0_stats.compressed_bytes_share());
    if (const auto& st = rank0_stats; st.counter("blocks important") + st.counter("blocks best-effort") > 0)
      std::printf("rank 0 (dgt): %llu blocks important, %llu unimportant (best-effort), %llu dropped (kept as residual), "
                  "%llu datagrams rejected\n",
                  (unsigned long long)st.counter("blocks important"), (unsigned long long)st.counter("blocks best-effort"),
                  (unsigned long long)st.counter("blocks dropped"), (unsigned long long)st.counter("datagrams rejected"));
    if (!metrics.empty()) {
      std::ofstream out(metrics);
      auto j = metrics_json(c, pol, r, rank0_stats);
      if (tuned)
        j["tune"] = {{"link_bytes_per_second", tuned->link.bytes_per_second},
                     {"link_latency_seconds", tuned->link.latency_seconds}, {"slicing", tuned->chosen.slicing},
                     {"collective", tuned->chosen.collective}, {"inflight_units", tuned->chosen.inflight_units},
                     {"credit_bytes", tuned->chosen.credit_bytes},
                     {"simulated_iteration_seconds", tuned->chosen.iteration_seconds},
                     {"simulated_default_seconds", tuned->default_seconds}, {"wall_seconds", tuned->wall_seconds}};
      for (const Retune& re : retunes)
        j["tune"]["retunes"].push_back({{"iteration", re.iteration}, {"link_bytes_per_second", re.bytes_per_second},
                                        {"slicing", re.chosen.slicing}, {"collective", re.chosen.collective},
                                        {"inflight_units", re.chosen.inflight_units},
                                        {"credit_bytes", re.chosen.credit_bytes}, {"switched", re.switched}});
      out << j.dump(2) << "\n";
      if (!out) throw std::runtime_error(metrics + ": cannot write metrics");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ngradsync-train: error: %s\n", e.what());
#if defined(GRADSYNC_WITH_MPI)
    // Live peers fail within milliseconds of this rank (gradsync tells them) and finalize with it;
    // a dead peer would hold MPI_Finalize forever.
    if (mpi) mpi->finalize_within(std::chrono::seconds(2), 1);
#endif
    return 1;
  }
  return 0;
}
