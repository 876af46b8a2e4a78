#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer {

namespace {
constexpr char magic[8] = {'G', 'S', 'Y', 'N', 'C', 'K', 'P', '1'};

// What must match for a resume to continue the same run.
nlohmann::json identity(const TrainConfig& c) {
  return {{"model", c.model.name}, {"width", c.model.width},   {"input", c.model.input}, {"classes", c.model.classes},
          {"dataset", c.dataset},  {"batch", c.batch},         {"ranks", c.ranks},       {"seed", c.seed}};
}

void write_floats(std::ofstream& out, const Tensor& t) {
  const std::vector<float> v = t.to_host();
  const std::uint64_t n = v.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(n * sizeof(float)));
}

void read_floats(std::ifstream& in, Tensor& t, const std::string& path, const std::string& what) {
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof n);
  if (!in || n != t.size())
    throw std::runtime_error(path + ": " + what + " has " + std::to_string(n) + " values, the model " +
                             std::to_string(t.size()) + " (truncated file or different model)");
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(float)));
  if (!in) throw std::runtime_error(path + ": truncated in " + what);
  t.from_host(v);
}
}  // namespace

void save_checkpoint(const std::string& path, const TrainConfig& config, std::size_t iteration, const Model& model,
                     Optimizer& optimizer) {
  const std::string tmp = path + ".tmp";  // written aside, then renamed: never a half checkpoint
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot write checkpoint");
    const std::string header = nlohmann::json{{"config", identity(config)}, {"iteration", iteration}}.dump();
    const std::uint64_t len = header.size();
    out.write(magic, sizeof magic);
    out.write(reinterpret_cast<const char*>(&len), sizeof len);
    out.write(header.data(), std::streamsize(len));
    for (auto* p : model.params()) {
      write_floats(out, p->value);
      write_floats(out, optimizer.state().at(p->index));
    }
    for (auto* b : model.buffers()) write_floats(out, *b);
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot rename " + tmp + " to it");
}

std::size_t load_checkpoint(const std::string& path, const TrainConfig& config, Model& model, Optimizer& optimizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open checkpoint");
  char m[sizeof magic];
  std::uint64_t len = 0;
  in.read(m, sizeof m);
  in.read(reinterpret_cast<char*>(&len), sizeof len);
  if (!in || std::memcmp(m, magic, sizeof magic) != 0 || len > (1u << 20))
    throw std::runtime_error(path + ": not a gradsync-train checkpoint");
  std::string header(len, '\0');
  in.read(header.data(), std::streamsize(len));
  nlohmann::json h = nlohmann::json::parse(header, nullptr, false);
  if (!in || h.is_discarded() || !h.contains("config") || !h.contains("iteration"))
    throw std::runtime_error(path + ": corrupt checkpoint header");
  const auto want = identity(config);
  for (auto& [key, value] : want.items())
    if (h["config"][key] != value)
      throw std::runtime_error(path + ": checkpoint has " + key + " = " + h["config"][key].dump() + ", this run " +
                               value.dump() + " (resume with the same configuration)");
  for (auto* p : model.params()) {
    read_floats(in, p->value, path, p->name);
    read_floats(in, optimizer.state().at(p->index), path, p->name + " momentum");
  }
  for (auto* b : model.buffers()) read_floats(in, *b, path, "buffers");
  return h["iteration"].get<std::size_t>();
}

}  // namespace gradsync::trainer
