#pragma once
/// What the attachment refuses: a parameter or gradient it cannot aggregate (gradsync aggregates
/// dense float32 host tensors), and ranks whose models differ (check_same_model, one line per tensor).
///
/// \code
///   const bool trained = check_parameter(name, weight);  // false: frozen or empty, not aggregated
///   check_gradient(name, weight);                        // after each accumulation into weight.grad()
/// \endcode
#include <ATen/ATen.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "model.hpp"
#include "model_check.hpp"

namespace gradsync::torch {

/// Whether parameter `name` is trained (and so aggregated); refuses what gradsync cannot aggregate.
inline bool check_parameter(const std::string& name, const at::Tensor& w) {
  if (!w.requires_grad() || w.numel() == 0) return false;
  if (w.scalar_type() != at::kFloat)
    throw UsageError("gradsync: parameter '" + name + "' is " + std::string(at::toString(w.scalar_type())) +
                     "; gradsync aggregates float32 gradients: convert the model with .float(), or freeze the "
                     "parameter (requires_grad=False)");
  if (!w.device().is_cpu())
    throw UsageError("gradsync: parameter '" + name + "' is on " + w.device().str() +
                     "; gradsync's PyTorch adapter aggregates host (CPU) tensors");
  if (w.layout() != at::kStrided || !w.is_non_overlapping_and_dense())
    throw UsageError("gradsync: parameter '" + name + "' is not a dense tensor; gradsync aggregates dense gradients");
  return true;
}

/// Whether dense tensors `a` and `b` of one shape hold their elements in the same memory order
/// (strides of dimensions of size 1 do not matter: autograd may give those any value).
inline bool same_memory_order(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (std::int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

/// Refuses parameter `name`'s gradient (w.grad()) unless gradsync can aggregate it in place.
inline void check_gradient(const std::string& name, const at::Tensor& w) {
  const at::Tensor& g = w.grad();
  if (g.is_sparse())
    throw UsageError("gradsync: parameter '" + name + "' got a sparse gradient; gradsync aggregates dense "
                     "gradients: build the layer with sparse=False (nn.Embedding(..., sparse=False))");
  if (g.scalar_type() != at::kFloat)
    throw UsageError("gradsync: parameter '" + name + "' got a " + std::string(at::toString(g.scalar_type())) +
                     " gradient; gradsync aggregates float32 gradients: keep the parameter float32");
  if (!g.device().is_cpu() || g.layout() != at::kStrided || !g.is_non_overlapping_and_dense() ||
      !same_memory_order(g, w))
    throw UsageError("gradsync: parameter '" + name + "' got a gradient that is not a dense host tensor laid "
                     "out like the parameter; gradsync aggregates those only");
}

/// check_same_model over every parameter (`trained`: check_parameter's answer for each) and buffer.
inline void check_models_agree(transport::Transport& t, const Model& model, const std::vector<bool>& trained) {
  std::vector<std::string> lines;
  auto line = [&](const char* kind, const std::string& n, const at::Tensor& x, const char* extra) {
    std::ostringstream s;
    s << kind << " '" << n << "' " << x.sizes() << " strides " << x.strides() << ' ' << x.scalar_type() << extra;
    lines.push_back(s.str());
  };
  for (std::size_t p = 0; p < model.parameters.size(); ++p)
    line("parameter", model.parameters[p].name, model.parameters[p].tensor, trained[p] ? "" : " (not trained)");
  for (const auto& [n, b] : model.buffers) line("buffer", n, b, "");
  check_same_model(t, lines);
}

}  // namespace gradsync::torch
