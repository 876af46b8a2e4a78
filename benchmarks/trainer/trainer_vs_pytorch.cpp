// Forward+backward time per batch of this trainer next to PyTorch (Debian's python3-torch, oneDNN
// convolutions) on the same models and shapes: resnet20, vgg11, alexnet-bn and lstm on 1x28x28,
// batch 32, at 1 and 2 threads. The PyTorch side is trainer_vs_pytorch.py, run in the same
// invocation (after ours); it reports the BLAS torch loaded, since Debian's torch takes whichever
// libblas.so.3 is installed and only OpenBLAS (libopenblas0-pthread) makes it a fair peer:
// run.sh installs that first. Without PyTorch the trainer's figures are still printed.
//
// The machine's speed drifts for seconds at a time (the same run 40% apart minutes later), so both
// sides alternate for `rounds` rounds and each keeps its best: both see the slow and the fast spells.
//
// trainer_vs_pytorch --accuracy ... trains both sides for an epoch instead (accuracy.cpp).
//
//   trainer_vs_pytorch [--batch 32] [--threads 1,2] [--reps 10] [--rounds 3]
//                      [--models resnet20,vgg11,alexnet-bn,lstm] [--python /usr/bin/python3]
#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "accuracy.hpp"
#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/model.hpp"

using namespace gradsync::trainer;

namespace {

// The fastest repetition: other jobs on a shared machine only ever add time (timeit's rule).
double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Process CPU time: on a shared machine wall time swings with other jobs; with one compute thread
// CPU seconds are the cost itself. Both sides report both.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Timing {
  double wall = 0, cpu = 0;
};
using Times = std::map<std::pair<std::string, int>, Timing>;  // (model, threads) -> best seconds

// Keeps the better of each figure of `from` in `into`.
void keep_best(Times& into, const Times& from) {
  for (const auto& [key, t] : from) {
    auto [it, fresh] = into.try_emplace(key, t);
    if (!fresh) it->second = {std::min(it->second.wall, t.wall), std::min(it->second.cpu, t.cpu)};
  }
}

// Best seconds of one forward + loss + backward over `reps`, after two warm-up iterations.
Timing time_trainer(const std::string& name, std::size_t batch, int reps) {
  auto model = make_model({.name = name, .width = 1.0, .input = {1, 28, 28}, .classes = 10});
  model->initialize(1);
  Tensor x({batch, 1, 28, 28});
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 255) / 255.0f - 0.5f;
  std::vector<std::int32_t> y(batch);
  for (std::size_t i = 0; i < batch; ++i) y[i] = std::int32_t(i % 10);
  SoftmaxCrossEntropy loss;
  std::vector<double> walls, cpus;
  for (int r = 0; r < reps + 2; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    Context ctx{.training = true, .seed = 1, .step = std::uint64_t(r)};
    Tensor logits = model->forward(x, ctx);
    loss.forward(logits, y);
    model->backward(loss.backward(), ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= 2) {
      walls.push_back(s);
      cpus.push_back(cpu_seconds() - c0);
    }
  }
  return {best(walls), best(cpus)};
}

struct Torch {
  std::string blas = "unknown", blas_rate = "-";       // the library torch loaded, 1-thread GFLOP/s
  Times times;
};

// Runs the PyTorch script ("blas LIB GFLOPS" then "name threads wall cpu" lines).
Torch time_pytorch(const std::string& python, const std::string& models, std::size_t batch,
                   const std::string& threads, int reps) {
  Torch out;
  const std::string cmd = python + " " + GRADSYNC_PYTORCH_SCRIPT + " --models " + models + " --batch " +
                          std::to_string(batch) + " --threads " + threads + " --reps " + std::to_string(reps);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 512> line{};
  while (fgets(line.data(), line.size(), p)) {
    std::istringstream in(line.data());
    std::string name;
    int t = 0;
    Timing time;
    if (std::string(line.data()).rfind("blas ", 0) == 0) in >> name >> out.blas >> out.blas_rate;
    else if (in >> name >> t >> time.wall >> time.cpu) out.times[{name, t}] = time;
    else std::fputs(line.data(), stderr);
  }
  if (pclose(p) != 0) std::fprintf(stderr, "note: the PyTorch side failed (is python3-torch installed?)\n");
  return out;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (std::stringstream ss(list); ss.good();) {
    std::string n;
    std::getline(ss, n, ',');
    if (!n.empty()) out.push_back(n);
  }
  return out;
}

}  // namespace

constexpr const char* kUsage =
    "usage: trainer_vs_pytorch [--batch 32] [--threads 1,2] [--reps 10] [--rounds 3]\n"
    "                          [--models resnet20,vgg11,alexnet-bn,lstm] [--python /usr/bin/python3]\n"
    "       trainer_vs_pytorch --accuracy ...   (one epoch of each side: accuracy.cpp)\n";

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--accuracy") return gradsync::trainer::bench::accuracy_main(argc, argv);
  std::size_t batch = 32;
  int reps = 10, rounds = 3;
  std::string models = "resnet20,vgg11,alexnet-bn,lstm", threads = "1,2", python = "/usr/bin/python3";
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {  // a flag without its value must not start a long benchmark with the defaults
      std::fprintf(stderr, "trainer_vs_pytorch: %s needs a value\n%s", k.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--batch") batch = std::stoul(v);
    else if (k == "--threads") threads = v;
    else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--rounds") rounds = std::max(1, std::stoi(v));
    else if (k == "--models") models = v;
    else if (k == "--python") python = v;
    else {
      std::fprintf(stderr, "trainer_vs_pytorch: unknown option %s\n%s", k.c_str(), kUsage);
      return 2;
    }
  }
  const std::vector<std::string> names = split(models);
  std::vector<int> counts;
  for (const auto& t : split(threads)) counts.push_back(std::stoi(t));
  Times ours;
  Torch torch;
  for (int round = 0; round < rounds; ++round) {
    Times mine;
    for (int t : counts) {
      backend::set_threads(t);
      for (const auto& n : names) mine[{n, t}] = time_trainer(n, batch, reps);
    }
    keep_best(ours, mine);
    Torch theirs = time_pytorch(python, models, batch, threads, reps);
    keep_best(torch.times, theirs.times);
    torch.blas = theirs.blas;
    torch.blas_rate = theirs.blas_rate;
  }
  std::printf("forward+backward per batch: 1x28x28, batch %zu, best of %d x %d rounds, alternating (seconds); ratio = "
              "ours / PyTorch\n", batch, reps, rounds);
  const bool openblas = torch.blas.find("openblas") != std::string::npos;
  std::printf("PyTorch's BLAS: %s, %s GFLOP/s at 1 thread%s\n", torch.blas.c_str(), torch.blas_rate.c_str(),
              openblas ? "" : "  (NOT OpenBLAS: install libopenblas0-pthread (run.sh does); the peer is handicapped)");
  std::printf("%-10s %7s %10s %10s %10s %10s %8s %8s\n", "model", "threads", "ours wall", "ours cpu", "torch wall",
              "torch cpu", "ratio w", "ratio c");
  for (int t : counts)
    for (const auto& n : names) {
      const Timing o = ours[{n, t}];
      auto it = torch.times.find({n, t});
      if (it == torch.times.end()) {
        std::printf("%-10s %7d %10.4f %10.4f %10s %10s %8s %8s\n", n.c_str(), t, o.wall, o.cpu, "-", "-", "-", "-");
      } else {
        const Timing p = it->second;
        std::printf("%-10s %7d %10.4f %10.4f %10.4f %10.4f %8.2f %8.2f\n", n.c_str(), t, o.wall, o.cpu, p.wall, p.cpu,
                    o.wall / p.wall, o.cpu / p.cpu);
      }
    }
  return 0;
}
