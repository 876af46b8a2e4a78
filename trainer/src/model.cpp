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

void Model::initialize(std::uint64_t seed) {
  for (auto* p : params_) {
    const std::uint64_t key = seed * 0x9E3779B97F4A7C15ull + p->index * 0xD1B54A32D192ED03ull + 1;
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
