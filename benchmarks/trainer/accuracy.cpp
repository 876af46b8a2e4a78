// trainer_vs_pytorch --accuracy: time to accuracy, which is what users feel. Per model and seed,
// gradsync's trainer (train(), one rank) and its PyTorch replica (accuracy.py: the same model,
// initialization, optimizer, schedule and data) each train for an epoch on Fashion-MNIST and are
// tested on the whole test set. Each run is one line of OUT/results.jsonl (side, model, seed, test
// accuracy and loss, training seconds, the machine, the commit, the compiler or torch's version),
// its per-iteration training losses OUT/losses/MODEL-seedS-SIDE[-same-start].txt; accuracy_report.py then
// writes OUT/table.md from every line in the folder (runs may be added in several invocations).
//
//   trainer_vs_pytorch --accuracy [--models resnet20,vgg11,alexnet-bn,lstm] [--seeds 1,2,3]
//                      [--epochs 1 | --iterations N] [--batch 64] [--lr 0.1] [--schedule cosine]
//                      [--warmup 0] [--momentum 0.9] [--wd 5e-4] [--width 1] [--threads 2]
//                      [--sides trainer,pytorch] [--same-start | --paired-step K] [--python python3]
//                      [--out DIR] [--data-dir DIR]
//
// --same-start: the PyTorch side starts from the trainer's initial weights and takes the trainer's
// data order (written to a temporary folder). Not a paired comparison of accuracies: fp32 rounding
// alone moves a run off its path within a few iterations (PyTorch fp32 against fp64 from the same
// start: 2% apart in weights after 5), so a same-start run is one more sample, not a twin.
// --paired-step K: instead of the accuracy runs, the trainer's first K iterations and PyTorch's
// step from the trainer's state before the last of them (paired_step.cpp, paired_step.py), a line
// per model and seed into OUT/paired_step.jsonl: where the two steps differ, beyond fp32 rounding.
#include "accuracy.hpp"
#include "paired_step.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/sync.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::bench {

namespace {

struct Options {
  std::vector<std::string> models{"resnet20", "vgg11", "alexnet-bn", "lstm"};
  std::vector<std::string> seeds{"1", "2", "3"};
  std::vector<std::string> sides{"trainer", "pytorch"};
  std::size_t epochs = 1, iterations = 0, batch = 64, paired_step = 0;
  std::string lr = "0.1", schedule = "cosine", warmup = "0", momentum = "0.9", wd = "5e-4", width = "1";
  int threads = 2;
  bool same_start = false;
  std::string python = "python3", out = "accuracy-results", data_dir = fashion_mnist_dir;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (std::stringstream ss(list); ss.good();) {
    std::string n;
    std::getline(ss, n, ',');
    if (!n.empty()) out.push_back(n);
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {  // argv[1] is --accuracy
    const std::string k = argv[i];
    if (k == "--same-start") {
      o.same_start = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--models") o.models = split(v);
    else if (k == "--seeds") o.seeds = split(v);
    else if (k == "--sides") o.sides = split(v);
    else if (k == "--epochs") o.epochs = std::stoul(v);
    else if (k == "--iterations") o.iterations = std::stoul(v);
    else if (k == "--paired-step") o.paired_step = std::stoul(v);
    else if (k == "--batch") o.batch = std::stoul(v);
    else if (k == "--lr") o.lr = v;
    else if (k == "--schedule") o.schedule = v;
    else if (k == "--warmup") o.warmup = v;
    else if (k == "--momentum") o.momentum = v;
    else if (k == "--wd") o.wd = v;
    else if (k == "--width") o.width = v;
    else if (k == "--threads") o.threads = std::stoi(v);
    else if (k == "--python") o.python = v;
    else if (k == "--out") o.out = v;
    else if (k == "--data-dir") o.data_dir = v;
    else throw std::invalid_argument("unknown option " + k);
  }
  for (const auto& s : o.sides)
    if (s != "trainer" && s != "pytorch") throw std::invalid_argument("--sides: trainer and/or pytorch, not " + s);
  return o;
}

/// One rank's synchronizer that keeps each iteration's training loss (the trainer reports it after
/// forward) and touches no gradient: with one rank the local gradient is the mean.
class LossLog final : public GradientSync {
 public:
  explicit LossLog(std::vector<float>& out) : out_(out) {}
  void gradient_ready(std::size_t, std::span<float>) override {}
  void wait_for(std::size_t) override {}
  void finish_iteration() override {}
  void report_loss(float loss) override { out_.push_back(loss); }
  bool reads_gradients() const override { return false; }

 private:
  std::vector<float>& out_;
};

TrainConfig config(const Options& o, const std::string& model, std::uint64_t seed) {
  TrainConfig c;
  c.model = {.name = model, .width = std::stod(o.width), .input = {1, 28, 28}, .classes = 10};
  c.data_dir = o.data_dir;
  c.batch = o.batch;
  c.epochs = o.epochs;
  c.iterations = o.iterations;
  c.lr = std::stof(o.lr);
  c.lr_schedule = o.schedule;
  c.warmup_epochs = std::stod(o.warmup);
  c.optimizer.momentum = std::stof(o.momentum);
  c.optimizer.weight_decay = std::stof(o.wd);
  c.seed = seed;
  c.ranks = 1;
  c.threads = o.threads;
  c.progress = false;
  return c;
}

std::string run_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    if (pclose(p) != 0) return "";
  }
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') continue;
    out += ch;
  }
  return out + "\"";
}

/// What the trainer side's line says about its machine and build.
std::string trainer_context() {
  std::string cpu = "unknown";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  const std::string root = std::string(GRADSYNC_SOURCE_ROOT);
  std::string commit = trimmed(run_command("git -C '" + root + "' rev-parse HEAD 2>/dev/null"));
  const bool changed = !trimmed(run_command("git -C '" + root + "' status --porcelain --untracked-files=no 2>/dev/null")).empty();
  char cores[32];
  std::snprintf(cores, sizeof cores, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  return "\"cpu\": " + json_string(cpu) + ", \"cores\": " + cores + ", \"compiler\": " + json_string(__VERSION__) +
         ", \"commit\": " + json_string(commit.empty() ? "unknown" : commit) +
         ", \"tree_changed\": " + (changed ? "true" : "false");
}

void write_losses(const std::string& path, const std::vector<float>& losses) {
  std::ofstream f(path);
  for (float v : losses) {
    char line[32];
    std::snprintf(line, sizeof line, "%.6f\n", double(v));
    f << line;
  }
}

/// The trainer's initial weights (forward order, with names, shapes and decay flags) and the
/// orders of the epochs the run takes, for accuracy.py --start.
void write_start(const std::string& dir, const TrainConfig& c, std::size_t epochs) {
  auto model = make_model(c.model);
  model->initialize(c.seed);
  std::ofstream values(dir + "/weights.f32", std::ios::binary), meta(dir + "/weights.json");
  meta << "{\"params\": [";
  for (const Param* p : model->params()) {
    const std::vector<float> v = p->value.to_host();
    values.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    std::string shape;
    for (std::size_t d : p->value.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    meta << (p->index ? ", " : "") << "{\"name\": " << json_string(p->name) << ", \"shape\": [" << shape
         << "], \"decay\": " << (p->decay ? "true" : "false") << "}";
  }
  meta << "]}\n";
  const std::size_t train_size = 60000;  // Fashion-MNIST's training set
  for (std::size_t e = 0; e < epochs; ++e) {
    const std::vector<std::uint32_t> order = epoch_order(train_size, c.seed, e);
    std::ofstream f(dir + "/order" + std::to_string(e) + ".u32", std::ios::binary);
    f.write(reinterpret_cast<const char*>(order.data()), std::streamsize(order.size() * sizeof(std::uint32_t)));
  }
}

std::string run_trainer(const Options& o, const std::string& model, const std::string& seed) {
  const TrainConfig c = config(o, model, std::stoull(seed));
  std::vector<float> losses;
  const TrainResult r = train(c, [&](std::size_t, const Model&) { return std::make_unique<LossLog>(losses); });
  const double seconds = std::accumulate(r.iteration_seconds.begin(), r.iteration_seconds.end(), 0.0);
  write_losses(o.out + "/losses/" + model + "-seed" + seed + "-trainer.txt", losses);
  const std::size_t tail = std::min<std::size_t>(50, losses.size());
  const double last = std::accumulate(losses.end() - long(tail), losses.end(), 0.0) / double(std::max<std::size_t>(1, tail));
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"side\": \"trainer\", \"model\": \"%s\", \"seed\": %s, \"iterations\": %zu, \"test_accuracy\": %.4f, "
                "\"test_loss\": %.6f, \"train_seconds\": %.3f, \"final_train_loss\": %.6f, \"same_start\": false, "
                "\"threads\": %d, ",
                model.c_str(), seed.c_str(), r.iterations, r.test_accuracy, r.test_loss, seconds, last, o.threads);
  return std::string(line) + trainer_context() + "}";
}

/// The recipe as accuracy.py and paired_step.py take it.
std::string recipe_args(const Options& o, const std::string& model, const std::string& seed) {
  return " --model " + model + " --seed " + seed + " --batch " + std::to_string(o.batch) + " --lr " + o.lr +
         " --schedule " + o.schedule + " --warmup " + o.warmup + " --momentum " + o.momentum + " --wd " + o.wd +
         " --width " + o.width + " --threads " + std::to_string(o.threads) + " --data-dir '" + o.data_dir + "'" +
         (o.iterations ? " --iterations " + std::to_string(o.iterations) : " --epochs " + std::to_string(o.epochs));
}

/// A folder of its own under /tmp while it lives: the trainer's start and states for PyTorch.
struct TempDir {
  std::string path;
  TempDir() {
    char dir[] = "/tmp/trainer_vs_pytorch.XXXXXX";
    if (!mkdtemp(dir)) throw std::runtime_error("cannot make a temporary folder");
    path = dir;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string last_line(const std::string& output) {
  const std::string out = trimmed(output);
  const std::size_t line = out.rfind('\n');
  return out.empty() ? "" : out.substr(line == std::string::npos ? 0 : line + 1);
}

std::string run_pytorch(const Options& o, const std::string& model, const std::string& seed) {
  std::string cmd = o.python + " " + GRADSYNC_ACCURACY_SCRIPT + recipe_args(o, model, seed) + " --losses '" + o.out +
                    "/losses/" + model + "-seed" + seed + "-pytorch" + (o.same_start ? "-same-start" : "") + ".txt'";
  std::optional<TempDir> start;
  if (o.same_start) {
    start.emplace();
    const std::size_t bpe = 60000 / o.batch;
    write_start(start->path, config(o, model, std::stoull(seed)),
                o.iterations ? (o.iterations + bpe - 1) / bpe : o.epochs);
    cmd += " --start '" + start->path + "'";
  }
  return last_line(run_command(cmd));
}

/// --paired-step K: the trainer's first K iterations (run_paired_step), then paired_step.py takes
/// the last of them in PyTorch from the trainer's state and reruns the K from its start.
std::string run_paired(const Options& o, const std::string& model, const std::string& seed) {
  const TempDir dir;
  const TrainConfig c = config(o, model, std::stoull(seed));
  write_start(dir.path, c, 1);
  const PairedStep trainer = run_paired_step(c, o.paired_step, dir.path);
  const std::string line =
      last_line(run_command(o.python + " " + GRADSYNC_PAIRED_STEP_SCRIPT + recipe_args(o, model, seed) + " --start '" +
                            dir.path + "' --steps " + std::to_string(o.paired_step)));
  if (line.empty() || line.back() != '}') return "";
  char extra[256];
  std::snprintf(extra, sizeof extra,
                ", \"direct_vs_train_max_abs\": %.3g, \"trainer_test_accuracy\": %.4f, \"trainer_test_loss\": %.6f, "
                "\"compiler\": %s}",
                trainer.direct_vs_train, trainer.test.accuracy, trainer.test.loss, json_string(__VERSION__).c_str());
  return line.substr(0, line.size() - 1) + extra;
}

// The figure after "key": in a results line (our own lines and accuracy.py's).
std::string field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return "-";
  const std::size_t from = at + key.size() + 4;
  return line.substr(from, line.find_first_of(",}", from) - from);
}

/// --paired-step: a line per model and seed into OUT/paired_step.jsonl, instead of the accuracy runs.
int paired_main(const Options& o) {
  mkdir(o.out.c_str(), 0755);
  std::ofstream results(o.out + "/paired_step.jsonl", std::ios::app);
  int failed = 0;
  for (const auto& model : o.models)
    for (const auto& seed : o.seeds) {
      std::string line;
      try {
        line = run_paired(o, model, seed);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s seed %s: %s\n", model.c_str(), seed.c_str(), e.what());
      }
      if (line.empty()) {
        std::fprintf(stderr, "note: %s seed %s: the paired step failed\n", model.c_str(), seed.c_str());
        ++failed;
        continue;
      }
      results << line << "\n" << std::flush;
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  return failed ? 1 : 0;
}

}  // namespace

int accuracy_main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainer_vs_pytorch --accuracy: %s\n", e.what());
    return 2;
  }
  if (o.paired_step) return paired_main(o);
  mkdir(o.out.c_str(), 0755);
  mkdir((o.out + "/losses").c_str(), 0755);
  std::ofstream results(o.out + "/results.jsonl", std::ios::app);
  std::printf("%-10s %5s %-8s %9s %9s %10s\n", "model", "seed", "side", "accuracy", "loss", "seconds");
  int failed = 0;
  for (const auto& model : o.models)
    for (const auto& seed : o.seeds)
      for (const auto& side : o.sides) {  // per seed both sides in turn: both see the machine's spells
        std::string line;
        try {
          line = side == "trainer" ? run_trainer(o, model, seed) : run_pytorch(o, model, seed);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s seed %s (%s): %s\n", model.c_str(), seed.c_str(), side.c_str(), e.what());
        }
        if (line.empty() || line.front() != '{') {
          std::fprintf(stderr, "note: %s seed %s: the %s side failed%s\n", model.c_str(), seed.c_str(), side.c_str(),
                       side == "pytorch" ? " (is torch installed for --python?)" : "");
          ++failed;
          continue;
        }
        results << line << "\n" << std::flush;
        std::printf("%-10s %5s %-8s %9s %9s %10s\n", model.c_str(), seed.c_str(), side.c_str(),
                    field(line, "test_accuracy").c_str(), field(line, "test_loss").c_str(),
                    field(line, "train_seconds").c_str());
        std::fflush(stdout);
      }
  results.close();
  const std::string report = o.python + " " + GRADSYNC_ACCURACY_REPORT + " '" + o.out + "'";
  if (std::system(report.c_str()) != 0) std::fprintf(stderr, "note: %s failed\n", report.c_str());
  return failed ? 1 : 0;
}

}  // namespace gradsync::trainer::bench
