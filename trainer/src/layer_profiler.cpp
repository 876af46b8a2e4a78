#include "gradsync/trainer/layer_profiler.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <gradsync/sim/median.hpp>
#include <gradsync/sim/profile_json.hpp>  // the profile schema's writer, shared with gradsync-sim

namespace gradsync::trainer {

void LayerProfiler::add(Pass pass, std::span<Param* const> layer, double seconds) {
  if (iterations_ == 0) throw std::logic_error("LayerProfiler::add before begin_iteration");
  if (iterations_ > keep_) return;
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

double LayerProfiler::median(const std::vector<double>& per_iteration, std::size_t end) const {
  const std::size_t skip = skipped(end);
  std::vector<double> v(end - skip, 0.0);  // iterations a layer got nothing in count as 0
  for (std::size_t i = skip; i < std::min(end, per_iteration.size()); ++i) v[i - skip] = per_iteration[i];
  return sim::median(std::move(v));
}

sim::Profile LayerProfiler::profile(const std::string& model, std::size_t iterations) const {
  const std::size_t end = std::min({iterations, iterations_, keep_});
  if (end == 0) throw std::logic_error("LayerProfiler: no iteration recorded");
  sim::Profile p{model, {}, {}};
  for (std::size_t i = skipped(end); i < std::min(end, totals_.size()); ++i)
    if (totals_[i] > 0) p.iteration_seconds.push_back(totals_[i]);
  for (const auto& [key, l] : layers_)
    p.layers.push_back({l.name, median(l.seconds[forward], end), median(l.seconds[backward], end), l.tensors});
  p.scale_compute_to(median(totals_, end));
  return p;
}

void LayerProfiler::write(const std::string& path, const std::string& model) const {
  sim::write_json(sim::profile_json(profile(model)), path, 1);
}

}  // namespace gradsync::trainer
