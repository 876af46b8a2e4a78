#pragma once
/// What every rank takes from rank 0: the model's parameters and buffers when an attachment starts
/// (as DDP does), and the layout order at its first step, so every rank lays out the same.
///
/// \code
///   copy_from_rank0(t, model);                                    // after check_models_agree
///   std::vector<std::size_t> order = rank0_order(t, steps.order);  // rank 0's, on every rank
/// \endcode
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "../core/error.hpp"
#include "exchange.hpp"
#include "model.hpp"

namespace gradsync::torch {

/// Rank 0's parameters and buffers into every rank's (the ranks' models agree: same shapes).
inline void copy_from_rank0(transport::Transport& t, const Model& model) {
  if (t.size() == 1) return;
  at::NoGradGuard no_grad;
  auto copy = [&](const at::Tensor& x) {
    if (!x.device().is_cpu())
      throw UsageError("gradsync: a tensor of the model is on " + x.device().str() +
                       "; gradsync's PyTorch adapter works on host (CPU) tensors");
    const bool in_place = x.is_non_overlapping_and_dense();
    at::Tensor data = in_place ? x : x.contiguous();
    broadcast_into(t, std::span(static_cast<std::byte*>(data.data_ptr()), data.nbytes()));
    if (!in_place) x.copy_(data);
  };
  for (const auto& p : model.parameters) copy(p.tensor);
  for (const auto& b : model.buffers) copy(b.second);
}

/// Rank 0's `order` (parameter indices) on every rank; every rank's holds the same parameters.
inline std::vector<std::size_t> rank0_order(transport::Transport& t, std::span<const std::size_t> order) {
  std::vector<std::byte> bytes(order.size() * sizeof(std::uint32_t));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto p = static_cast<std::uint32_t>(order[i]);
    std::memcpy(bytes.data() + i * sizeof p, &p, sizeof p);
  }
  broadcast(t, bytes);
  std::vector<std::size_t> out(order.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t p = 0;
    std::memcpy(&p, bytes.data() + i * sizeof p, sizeof p);
    out[i] = p;
  }
  return out;
}

}  // namespace gradsync::torch
