#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "gradsync/trainer/formats.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer {

namespace {
constexpr char magic[8] = {'G', 'S', 'Y', 'N', 'C', 'K', 'P', '1'};
constexpr char state_magic[8] = {'G', 'S', 'Y', 'N', 'C', 'S', 'T', '1'};

// What must match for a resume to continue the same run.
nlohmann::json identity(const TrainConfig& c) {
  return {{"model", c.model.name}, {"width", c.model.width},   {"input", c.model.input}, {"classes", c.model.classes},
          {"dataset", c.dataset},  {"batch", c.batch},         {"ranks", c.ranks},       {"seed", c.seed},
          {"precision", c.precision}};
}

void write_floats(std::ofstream& out, std::span<const float> v) {
  const std::uint64_t n = v.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(n * sizeof(float)));
}

// Tensors live in backend memory: staged through the host on the device build.
void read_tensor(CheckpointReader& in, Tensor& t, const std::string& what) {
  std::vector<float> v(t.size());
  in.read(v, what);
  t.from_host(v);
}

// Writes `path` aside, then renames it into place: never a half-written file.
void write_atomically(const std::string& path, const std::function<void(std::ofstream&)>& body) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot write checkpoint");
    body(out);
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot rename " + tmp + " to it");
}

void write_header(std::ofstream& out, const char (&m)[8], const nlohmann::json& header) {
  const std::string text = header.dump();
  const std::uint64_t len = text.size();
  out.write(m, sizeof m);
  out.write(reinterpret_cast<const char*>(&len), sizeof len);
  out.write(text.data(), std::streamsize(len));
}

}  // namespace

std::string sync_state_path(const std::string& checkpoint, std::size_t rank) {
  return checkpoint + ".rank" + std::to_string(rank);
}

void save_checkpoint(const std::string& path, const TrainConfig& config, std::size_t iteration, const Model& model,
                     Optimizer& optimizer, const GradientSync& sync, const LossScaler* scaler) {
  nlohmann::json header = {{"config", identity(config)}, {"iteration", iteration}, {"sync", sync.describe()},
                           {"sync_state", !sync.state().empty()}};
  if (scaler) {
    const auto s = scaler->state();
    header["loss_scaler"] = {{"scale", s.scale}, {"clean", s.clean}, {"skipped", s.skipped}};
  }
  write_atomically(path, [&](std::ofstream& out) {
    write_header(out, magic, header);
    for (auto* p : model.params()) {
      write_floats(out, p->value.to_host());
      write_floats(out, optimizer.state().at(p->index).to_host());
    }
    for (auto* b : model.buffers()) write_floats(out, b->to_host());
  });
}

void save_sync_state(const std::string& path, std::size_t rank, std::size_t iteration, const GradientSync& sync) {
  if (sync.state().empty()) return;
  write_atomically(sync_state_path(path, rank), [&](std::ofstream& out) {
    write_header(out, state_magic, {{"iteration", iteration}, {"rank", rank}, {"sync", sync.describe()}});
    write_floats(out, sync.state());
  });
}

std::size_t load_checkpoint(const std::string& path, const TrainConfig& config, Model& model, Optimizer& optimizer,
                            GradientSync& sync, std::size_t rank, LossScaler* scaler) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open checkpoint");
  CheckpointReader reader(in, magic, path, "gradsync-train checkpoint");
  nlohmann::json h = reader.header();
  if (!h.contains("config")) throw std::runtime_error(path + ": corrupt gradsync-train checkpoint header (no config)");
  const auto want = identity(config);
  for (auto& [key, value] : want.items())
    if (h["config"][key] != value)
      throw std::runtime_error(path + ": checkpoint has " + key + " = " + h["config"][key].dump() + ", this run " +
                               value.dump() + " (resume with the same configuration)");
  const std::string sync_text = h.value("sync", "exact all-reduce");
  if (sync_text != sync.describe())
    throw std::runtime_error(path + ": checkpoint was written with synchronization '" + sync_text + "', this run uses '" +
                             sync.describe() + "' (resume with the same --sync, slicing, priority, codec and collective)");
  for (auto* p : model.params()) {
    read_tensor(reader, p->value, p->name);
    read_tensor(reader, optimizer.state().at(p->index), p->name + " momentum");
  }
  for (auto* b : model.buffers()) read_tensor(reader, *b, "buffers");
  const auto iteration = reader.iteration();
  if (scaler) {  // mixed precision (part of the identity checked above): the header has the state
    try {
      const auto& s = h.at("loss_scaler");
      scaler->restore({s.at("scale").get<float>(), s.at("clean").get<int>(), s.at("skipped").get<std::uint64_t>()});
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ": corrupt loss scaler state in the header (" + e.what() + ")");
    }
  }
  if (!h.value("sync_state", false)) {
    sync.load_state(iteration, {});
    return iteration;
  }

  // Error-feedback residuals: each rank's own, in its own file beside the checkpoint.
  const std::string state = sync_state_path(path, rank);
  std::ifstream sin(state, std::ios::binary);
  if (!sin) throw std::runtime_error(state + ": cannot open rank " + std::to_string(rank) + "'s codec state (" + path +
                                     " needs it: keep the .rank<N> files with the checkpoint)");
  CheckpointReader state_reader(sin, state_magic, state, "gradsync-train codec state");
  const nlohmann::json& sh = state_reader.header();
  if (sh["iteration"] != h["iteration"] || !sh.contains("rank") || sh["rank"] != rank)
    throw std::runtime_error(state + ": codec state of rank " + sh.value("rank", nlohmann::json()).dump() +
                             " at iteration " + sh["iteration"].dump() + ", but " + path + " is at iteration " +
                             std::to_string(iteration) + " (files from different checkpoints)");
  std::vector<float> saved(sync.state().size());
  state_reader.read(saved, "codec residuals");
  sync.load_state(iteration, saved);
  return iteration;
}

}  // namespace gradsync::trainer
