#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
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

// Writes `path` aside, then renames it into place: never a half-written file. The file it replaces
// stays as `previous` (a hard link, so no copy): when a run is killed between the ranks' files and
// rank 0's, the generation before is still whole on every rank.
void write_atomically(const std::string& path, const std::string& previous, const std::function<void(std::ofstream&)>& body) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot write checkpoint");
    body(out);
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  std::error_code ec;
  if (fs::exists(path, ec)) {
    const std::string prev_tmp = previous + ".tmp";
    fs::remove(prev_tmp, ec);
    fs::create_hard_link(path, prev_tmp, ec);
    if (ec) fs::copy_file(path, prev_tmp, fs::copy_options::overwrite_existing, ec);  // no hard links here
    if (ec || std::rename(prev_tmp.c_str(), previous.c_str()) != 0)
      throw std::runtime_error(path + ": cannot keep the previous checkpoint as " + previous);
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

std::string previous_checkpoint_path(const std::string& checkpoint) { return checkpoint + ".prev"; }

void save_checkpoint(const std::string& path, const TrainConfig& config, std::size_t iteration, const Model& model,
                     Optimizer& optimizer, const GradientSync& sync, const LossScaler* scaler) {
  nlohmann::json header = {{"config", identity(config)}, {"iteration", iteration}, {"sync", sync.describe()},
                           {"sync_state", sync.state_size() > 0}};
  if (scaler) {
    const auto s = scaler->state();
    header["loss_scaler"] = {{"scale", s.scale}, {"clean", s.clean}, {"skipped", s.skipped}};
  }
  write_atomically(path, previous_checkpoint_path(path), [&](std::ofstream& out) {
    write_header(out, magic, header);
    for (auto* p : model.params()) {
      write_floats(out, p->value.to_host());
      write_floats(out, optimizer.state().at(p->index).to_host());
    }
    for (auto* b : model.buffers()) write_floats(out, b->to_host());
  });
}

void save_sync_state(const std::string& path, std::size_t rank, std::size_t iteration, const GradientSync& sync) {
  if (sync.state_size() == 0) return;
  write_atomically(sync_state_path(path, rank), sync_state_path(previous_checkpoint_path(path), rank),
                   [&](std::ofstream& out) {
    write_header(out, state_magic, {{"iteration", iteration}, {"rank", rank}, {"sync", sync.describe()}});
    write_floats(out, sync.state());
  });
}

namespace {
// The file among `checkpoint`'s and the previous generation's that holds rank `rank`'s codec state
// at `iteration`; nullopt (and `why`) when neither does.
std::optional<std::string> state_file(const std::string& checkpoint, std::size_t rank, std::size_t iteration,
                                      std::string& why) {
  const std::string own = sync_state_path(checkpoint, rank);
  const std::string previous = sync_state_path(previous_checkpoint_path(checkpoint), rank);
  for (const std::string& file : {own, previous}) {
    std::ifstream in(file, std::ios::binary);
    if (!in) continue;
    try {
      const CheckpointReader reader(in, state_magic, file, "gradsync-train codec state");
      if (reader.iteration() == iteration && reader.header().value("rank", nlohmann::json()) == rank) return file;
    } catch (const std::exception&) {  // unreadable: look in the other generation
    }
  }
  why = own + ": no codec state of rank " + std::to_string(rank) + " at iteration " + std::to_string(iteration) +
        " there nor in " + previous + " (keep the .rank<N> files with the checkpoint, where every rank can read them)";
  return std::nullopt;
}
}  // namespace

std::size_t load_checkpoint(const std::string& path, const TrainConfig& config, Model& model, Optimizer& optimizer,
                            GradientSync& sync, std::size_t rank, std::size_t world, LossScaler* scaler) {
  // The newest generation that every rank finished writing: `path`, or the previous one when the run
  // was killed after some ranks' codec state files but before rank 0's checkpoint, or the reverse.
  std::string why, first_why;
  for (const std::string& file : {path, previous_checkpoint_path(path)}) {
    if (file != path && !std::filesystem::exists(file)) break;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error(file + ": cannot open checkpoint");
    CheckpointReader reader(in, magic, file, "gradsync-train checkpoint");
    const nlohmann::json& h = reader.header();
    if (!h.contains("config")) throw std::runtime_error(file + ": corrupt gradsync-train checkpoint header (no config)");
    const auto want = identity(config);
    for (auto& [key, value] : want.items())
      if (h["config"][key] != value)
        throw std::runtime_error(file + ": checkpoint has " + key + " = " + h["config"][key].dump() + ", this run " +
                                 value.dump() + " (resume with the same configuration)");
    const std::string sync_text = h.value("sync", "exact all-reduce");
    if (sync_text != sync.describe())
      throw std::runtime_error(file + ": checkpoint was written with synchronization '" + sync_text +
                               "', this run uses '" + sync.describe() +
                               "' (resume with the same --sync, slicing, priority, codec and collective)");
    const std::size_t iteration = reader.iteration();
    std::optional<std::string> own_state;  // error-feedback residuals: each rank's own file
    if (h.value("sync_state", false)) {
      // Every rank checks every rank's files, so all choose the same generation.
      bool whole = true;
      for (std::size_t r = 0; r < world && whole; ++r) {
        auto found = state_file(path, r, iteration, why);
        whole = found.has_value();
        if (r == rank) own_state = std::move(found);
      }
      if (!whole) {
        if (first_why.empty()) first_why = why;
        continue;
      }
    }
    if (file != path && rank == 0)
      std::fprintf(stderr, "gradsync-train: %s; resuming from the generation before, %s (iteration %zu)\n",
                   first_why.c_str(), file.c_str(), iteration);

    for (auto* p : model.params()) {
      read_tensor(reader, p->value, p->name);
      read_tensor(reader, optimizer.state().at(p->index), p->name + " momentum");
    }
    for (auto* b : model.buffers()) read_tensor(reader, *b, "buffers");
    if (scaler) {  // mixed precision (part of the identity checked above): the header has the state
      try {
        const auto& s = h.at("loss_scaler");
        scaler->restore({s.at("scale").get<float>(), s.at("clean").get<int>(), s.at("skipped").get<std::uint64_t>()});
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(file + ": corrupt loss scaler state in the header (" + e.what() + ")");
      }
    }
    if (!own_state) {
      sync.load_state(iteration, {});
      return iteration;
    }
    std::ifstream sin(*own_state, std::ios::binary);
    CheckpointReader state_reader(sin, state_magic, *own_state, "gradsync-train codec state");
    std::vector<float> saved(sync.state_size());
    state_reader.read(saved, "synchronizer state (residuals, DGT contributions)");
    sync.load_state(iteration, saved);
    return iteration;
  }
  throw std::runtime_error(first_why);
}

}  // namespace gradsync::trainer
