#include "gradsync/trainer/model.hpp"

#include <cmath>
#include <set>

#include "gradsync/trainer/kernels.hpp"

namespace gradsync::trainer {

Model::Model(ModelConfig config, ModulePtr root) : config_(std::move(config)), root_(std::move(root)) {
  root_->collect_params(params_);
  std::set<std::string> names;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    params_[i]->index = i;
    if (!names.insert(params_[i]->name).second)
      throw std::logic_error("model " + config_.name + ": duplicate parameter name " + params_[i]->name);
  }
}

std::vector<Tensor*> Model::buffers() const {
  std::vector<Tensor*> out;
  root_->collect_buffers(out);
  return out;
}

std::size_t Model::parameter_count() const {
  std::size_t n = 0;
  for (auto* p : params_) n += p->value.size();
  return n;
}

namespace {
// splitmix64's finalizer: a bijection that scatters nearby inputs over all 64 bits.
std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

void Model::initialize(std::uint64_t seed) {
  for (auto* p : params_) {
    // The generator (kernels.hpp hash_uniform) hashes key + 0x9E3779B97F4A7C15 * (counter + 1): a
    // key that moved by that constant per seed made seed s + 1 draw seed s's numbers one counter on
    // (a uniform tensor was its predecessor shifted by one element). Hashed keys start every
    // (seed, tensor) stream at an unrelated point.
    const std::uint64_t key = mix64(mix64(seed) ^ (p->index * 0xD1B54A32D192ED03ull + 1));
    const std::size_t n = p->value.size();
    switch (p->init) {
      case Param::Init::zeros: p->value.fill(0.0f); break;
      case Param::Init::ones: p->value.fill(1.0f); break;
      case Param::Init::uniform: backend::for_each(n, kernels::InitUniform{p->value.data(), key, p->init_scale}); break;
      case Param::Init::normal: backend::for_each(n, kernels::InitNormal{p->value.data(), key, p->init_scale}); break;
    }
    p->grad.fill(0.0f);
  }
}

std::vector<std::pair<std::string, std::size_t>> Model::layout() const {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (auto* p : params_) out.emplace_back(p->name, p->value.size());
  return out;
}

std::size_t Model::labels_per_sample() const { return config_.name == "lstm-lm" ? config_.input.at(0) : 1; }

}  // namespace gradsync::trainer
