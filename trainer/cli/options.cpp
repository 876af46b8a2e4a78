#include "cli/options.hpp"

#include <CLI/CLI.hpp>

#include <gradsync/codec/any.hpp>
#include <gradsync/collective/spec.hpp>
#include <gradsync/priority/any.hpp>
#include <gradsync/slicing/any.hpp>

namespace gradsync::trainer::cli {

TrainConfig default_config() {
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

std::chrono::milliseconds RunOptions::patience() const {
  // Ranks wait for rank 0 while it evaluates or checkpoints: the default allows minutes, not seconds.
  return std::chrono::milliseconds{static_cast<long long>(timeout_s * 1000)};
}

namespace {

/// The flags that only shape other fields once parsed.
struct Switches {
  bool quiet = false, no_eval = false;
  std::pair<std::size_t, std::size_t> inject_nan;
};

// The add_* functions run in the order --help lists the flags.

void add_model_options(CLI::App& app, TrainConfig& c, std::string& input) {
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
}

void add_optimization_options(CLI::App& app, TrainConfig& c) {
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
}

void add_sync_options(CLI::App& app, RunOptions& o) {
  app.add_option("--ranks", o.train.ranks, "In-process ranks (threads, one replica each)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--threads", o.train.threads, "Compute threads in all")->check(CLI::Range(1, 1024))->capture_default_str();
  Policies& pol = o.policies;
  app.add_option("--sync", pol.sync, "library (gradsync::AnySynchronizer) or local (exact reference all-reduce)")
      ->check(CLI::IsMember({"library", "local"}))->capture_default_str();
  // Each family's grammar is the one its parse errors list (gradsync::*::Any*::grammar; the
  // collectives' is collective::Spec's, which AnyCollective parses with, without the collectives).
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
                 "Synchronizer collective: " + std::string(gradsync::collective::Spec::grammar))
      ->capture_default_str();
  app.add_option("--inflight", o.inflight, "Units whose collectives progress at once (Options::inflight_units; 0: the library's default)")
      ->check(CLI::Range(0, 64));
  app.add_option("--credit", o.credit_mb, "MiB of fp32 units on the wire at once (Options::credit_bytes; 0: the library's default)")
      ->check(CLI::NonNegativeNumber);
}

void add_output_and_tuning_options(CLI::App& app, RunOptions& o) {
  app.add_option("--metrics", o.metrics, "Write metrics JSON here");
  app.add_option("--trace", o.trace_path, "Write a Chrome trace (open in Perfetto): per-layer compute, per-unit queue and wire");
  app.add_option("--profile", o.profile_path,
                 "Write rank 0's per-layer compute times (medians after 2 warm-up iterations) and tensor sizes: "
                 "a gradsync-sim profile (tools/sim/README.md)");
  app.add_flag("--tune", o.tune,
               "Choose --slicing, --inflight, --credit and --collective with gradsync's simulator, for the link "
               "measured between ranks 0 and 1 at start (tools/sim/README.md)");
  app.add_option("--tune-profile", o.tune_profile_path, "--tune: the model profile to simulate (written by --profile)")
      ->check(CLI::ExistingFile);
  app.add_option("--tune-collectives", o.tune_collectives, "--tune: the collectives it may choose")
      ->delimiter(',')->capture_default_str();
  app.add_option("--retune-every", o.retune_every,
                 "--tune: every N iterations re-read the link from the units' timings; when its rate moved by a factor "
                 "1.5 two windows in a row, tune again and switch every rank at once (codecs without error feedback)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tune-steady", o.tune_steady,
                 "--tune: after N iterations tune again, for the same link, on the compute rank 0 measured in them "
                 "(per layer, after 2 warm-up iterations) and switch every rank at once where the choice differs "
                 "(codecs without error feedback); 0: keep the start-up choice")
      ->capture_default_str();
  app.add_option("--bandwidth", o.bandwidth, "Emulate links of this speed per rank pair: 1gbit, 10gbit+50us, 1gbit/nic ...");
}

void add_run_options(CLI::App& app, RunOptions& o, Switches& s) {
  TrainConfig& c = o.train;
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
  app.add_option("--timeout", o.timeout_s,
                 "Seconds any wait for a peer may last before the run fails naming that peer (Options::timeout and "
                 "the transport's); ranks also wait this long for rank 0's evaluation and checkpoints")
      ->check(CLI::Range(0.1, 86400.0))->capture_default_str();
  app.add_flag("--no-eval", s.no_eval, "Skip test-set evaluation");
  app.add_flag("--quiet,-q", s.quiet, "No progress line");
}

void add_fault_options(CLI::App& app, RunOptions& o, Switches& s) {
  app.add_flag("--print-digest", o.train.print_digest, "At the end every rank prints a digest of its weights (replicas must agree)")
      ->group("Fault injection");
  app.add_option("--inject-nan", s.inject_nan,
                 "RANK:ITERATION: that rank hands over a NaN gradient at that iteration (checks "
                 "that every rank stops, or under --precision mixed skips the step)")
      ->delimiter(':')->group("Fault injection");
  app.add_option("--bandwidth-change", o.bandwidth_change,
                 "ITERATION:LINK: from that iteration on, every rank's emulated links (--bandwidth) take LINK's rate and "
                 "latency (1gbit, 1gbit+5ms)")
      ->delimiter(':')->group("Fault injection");
}

/// Every name of every flag given, so that later steps can tell a default from a choice.
std::set<std::string, std::less<>> given_flags(const CLI::App& app) {
  std::set<std::string, std::less<>> given;
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0) continue;
    for (const std::string& name : option->get_lnames()) given.insert("--" + name);
    for (const std::string& name : option->get_snames()) given.insert("-" + name);
  }
  return given;
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

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, RunOptions& o) {
  CLI::App app{"gradsync-train: data-parallel training on in-process ranks with the gradsync hooks"};
  Switches s;
  add_model_options(app, o.train, o.input);
  add_optimization_options(app, o.train);
  add_sync_options(app, o);
  add_output_and_tuning_options(app, o);
  add_run_options(app, o, s);
  add_fault_options(app, o, s);
  CLI11_PARSE(app, argc, argv);
  o.given = given_flags(app);
  if (o.was_given("--inject-nan")) o.train.inject_nan = TrainConfig::InjectNan{s.inject_nan.first, s.inject_nan.second};
  o.train.progress = !s.quiet;
  o.train.evaluate = !s.no_eval;
  // --slicing auto is --tune, spelt so that Open MPI's processes, which read an argument --tune
  // as their own "--tune FILE", leave it alone.
  if (o.policies.slicing == "auto") {
    o.slicing_auto = o.tune = true;
    o.policies.slicing = Policies{}.slicing;
  }
  return std::nullopt;
}

void resolve_model(RunOptions& o) {
  TrainConfig& c = o.train;
  if (c.model.name == "lstm-lm") {
    c.model.input = {o.input.empty() ? 32 : parse_shape(o.input).at(0)};
    if (!o.was_given("--classes")) c.model.classes = 10000;
    if (!o.was_given("--dataset")) c.dataset = "synthetic";
  } else if (!o.input.empty()) {
    c.model.input = parse_shape(o.input);
  }
  if (c.dataset == "fashion-mnist" && c.model.name == "lstm-lm")
    throw gradsync::ConfigError("lstm-lm trains on synthetic tokens: use --dataset synthetic");
}

}  // namespace gradsync::trainer::cli
