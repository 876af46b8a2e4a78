#include "gradsync/trainer/layer_profiler.hpp"

#include <stdexcept>
#include <utility>

#include <gradsync/sim/median.hpp>
#include <gradsync/sim/profile_json.hpp>  // the profile schema's writer, shared with gradsync-sim

namespace gradsync::trainer {

void LayerProfiler::add(Pass pass, std::span<Param* const> layer, double seconds) {
  if (iterations_ == 0) throw std::logic_error("LayerProfiler::add before begin_iteration");
  const std::size_t key = layer.empty() ? 0 : layer.front()->index + 1;
  auto [it, fresh] = layers_.try_emplace(key);
  Layer& l = it->second;
  if (fresh) {
    l.name = layer.empty() ? "input" : layer.front()->name.substr(0, layer.front()->name.rfind('.'));
    for (const Param* p : layer) l.tensors.push_back({p->name, p->value.size()});
  }
  std::vector<double>& s = l.seconds[pass];
  s.resize(iterations_, 0.0);
  s.back() += seconds;
  totals_.resize(iterations_, 0.0);
  totals_.back() += seconds;
}

double LayerProfiler::median(const std::vector<double>& per_iteration) const {
  const std::size_t skip = skipped();
  std::vector<double> v(iterations_ - skip, 0.0);  // iterations a layer got nothing in count as 0
  for (std::size_t i = skip; i < per_iteration.size(); ++i) v[i - skip] = per_iteration[i];
  return sim::median(std::move(v));
}

sim::Profile LayerProfiler::profile(const std::string& model) const {
  if (iterations_ == 0) throw std::logic_error("LayerProfiler: no iteration recorded");
  sim::Profile p{model, {}, {}};
  for (std::size_t i = skipped(); i < totals_.size(); ++i)
    if (totals_[i] > 0) p.iteration_seconds.push_back(totals_[i]);
  for (const auto& [key, l] : layers_)
    p.layers.push_back({l.name, median(l.seconds[forward]), median(l.seconds[backward]), l.tensors});
  const double sum = p.compute_seconds();
  if (const double scale = sum > 0 ? median(totals_) / sum : 1; scale != 1)
    for (sim::ComputeLayer& l : p.layers) {
      l.forward_seconds *= scale;
      l.backward_seconds *= scale;
    }
  return p;
}

void LayerProfiler::write(const std::string& path, const std::string& model) const {
  sim::write_json(sim::profile_json(profile(model)), path, 1);
}

}  // namespace gradsync::trainer
