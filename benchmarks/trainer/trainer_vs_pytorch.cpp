// Forward+backward time per batch of this trainer next to PyTorch (Debian's python3-torch, oneDNN)
// on the same models and shapes: vgg11 and resnet20 on 1x28x28, batch 32, one thread by default.
// The PyTorch side is trainer_vs_pytorch.py, run in the same invocation on OpenBLAS (it installs
// and checks it: ../torch_blas.py, whose line heads the output); without PyTorch the trainer's
// figures are still printed.
//
//   trainer_vs_pytorch [--batch 32] [--threads 1] [--reps 10] [--models vgg11,resnet20] [--python /usr/bin/python3]
#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

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

// Runs the PyTorch script; returns model -> best seconds ("name wall cpu" lines).
std::map<std::string, Timing> time_pytorch(const std::string& python, const std::string& models, std::size_t batch,
                                           int threads, int reps) {
  std::map<std::string, Timing> out;
  const std::string cmd = python + " " + GRADSYNC_PYTORCH_SCRIPT + " --models " + models + " --batch " +
                          std::to_string(batch) + " --threads " + std::to_string(threads) + " --reps " +
                          std::to_string(reps);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 512> line{};
  while (fgets(line.data(), line.size(), p)) {
    std::istringstream in(line.data());
    std::string name;
    Timing t;
    if (line[0] == '#') std::fputs(line.data(), stdout);  // the PyTorch side's version and BLAS, for the table
    else if (in >> name >> t.wall >> t.cpu) out[name] = t;
    else std::fputs(line.data(), stderr);
  }
  if (pclose(p) != 0) std::fprintf(stderr, "note: the PyTorch side failed (is python3-torch installed?)\n");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t batch = 32;
  int threads = 1, reps = 10;
  std::string models = "vgg11,resnet20", python = "/usr/bin/python3";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") batch = std::stoul(v);
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--models") models = v;
    else if (k == "--python") python = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  backend::set_threads(threads);
  std::vector<std::string> names;
  for (std::stringstream ss(models); ss.good();) {
    std::string n;
    std::getline(ss, n, ',');
    if (!n.empty()) names.push_back(n);
  }
  std::map<std::string, Timing> ours;
  for (const auto& n : names) ours[n] = time_trainer(n, batch, reps);
  const auto torch = time_pytorch(python, models, batch, threads, reps);
  std::printf("forward+backward per batch: 1x28x28, batch %zu, %d thread(s), best of %d (seconds)\n", batch,
              threads, reps);
  std::printf("%-10s %10s %10s %10s %10s %8s %8s\n", "model", "ours wall", "ours cpu", "torch wall", "torch cpu",
              "ratio w", "ratio c");
  for (const auto& n : names) {
    const Timing o = ours[n];
    auto it = torch.find(n);
    if (it == torch.end()) {
      std::printf("%-10s %10.4f %10.4f %10s %10s %8s %8s\n", n.c_str(), o.wall, o.cpu, "-", "-", "-", "-");
    } else {
      const Timing t = it->second;
      std::printf("%-10s %10.4f %10.4f %10.4f %10.4f %8.2f %8.2f\n", n.c_str(), o.wall, o.cpu, t.wall, t.cpu,
                  o.wall / t.wall, o.cpu / t.cpu);
    }
  }
  return 0;
}
