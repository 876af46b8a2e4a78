#pragma once
/// Model: a PyTorch model as the adapter sees it - its parameters and buffers as tensors, and its
/// module tree (module_order.hpp's ModuleNode), built by the LibTorch frontend
/// (torch/distributed_optimizer.hpp) and by the Python package (gradsync.torch).
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "module_order.hpp"

namespace gradsync::torch {

struct Model {
  struct Parameter {
    std::string name;
    at::Tensor tensor;
    bool optimized = true;  ///< in the optimizer (zero_grad and the step apply to it)
  };
  std::vector<Parameter> parameters;  ///< each once (tied ones under their first name)
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  std::vector<ModuleNode> modules;
};

}  // namespace gradsync::torch
