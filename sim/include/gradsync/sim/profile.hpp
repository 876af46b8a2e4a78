#pragma once
/// Profile: what the simulator knows of a model. Its compute layers in forward order, each with a
/// forward and a backward time (seconds on one rank) and the parameter tensors whose gradients its
/// backward pass produces. The tensors, in order, are the ModelLayout the real Synchronizer gets
/// (gradsync calls a tensor a "layer"); a compute layer may own several tensors (a convolution's
/// weight and bias) or none (ReLU, pooling: time only).
///
/// A measured profile may also carry one rank's compute per iteration (`iteration_seconds`): the
/// spread the simulator draws each rank's pace from (rank skew, simulator.hpp).
///
/// Invariants (validate() checks them and names the layer and the fix): at least one tensor in
/// all; every tensor has at least one element; every time is finite and >= 0; every per-iteration
/// compute sample is finite and > 0.
///
/// \code
///   gradsync::sim::Profile p{"toy", {{"fc1", 1.0, 1.0, {{"fc1.weight", 1000}}},
///                                    {"relu", 0.1, 0.1, {}},
///                                    {"fc2", 1.0, 1.0, {{"fc2.weight", 1000}}}}};
///   p.validate();
///   gradsync::ModelLayout layout = p.layout();   // fc1.weight, fc2.weight
/// \endcode
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>

namespace gradsync::sim {

/// One compute layer of the forward pass.
struct ComputeLayer {
  std::string name;
  double forward_seconds = 0;   ///< forward time of this layer on one rank
  double backward_seconds = 0;  ///< backward time; its tensors' gradients are ready at its end
  std::vector<LayerSpec> tensors;  ///< parameter tensors, in forward order (may be empty)
};

struct Profile {
  std::string name;
  std::vector<ComputeLayer> layers;  ///< forward order
  /// One rank's measured compute (forward + backward) per iteration after the warm-up; empty:
  /// every iteration takes the layers' times (built-in profiles).
  std::vector<double> iteration_seconds;

  /// Throws ConfigError naming the first layer that breaks an invariant, and the fix.
  void validate() const {
    auto fail = [&](std::size_t i, const std::string& what) {
      throw ConfigError("gradsync: profile '" + name + "', layer " + std::to_string(i) + " ('" + layers[i].name +
                        "'): " + what);
    };
    std::size_t tensors = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const ComputeLayer& l = layers[i];
      for (double s : {l.forward_seconds, l.backward_seconds})
        if (!(s >= 0) || !std::isfinite(s))
          fail(i, "time " + std::to_string(s) + " s is not a finite number >= 0; give seconds, e.g. 0.0012");
      for (const LayerSpec& t : l.tensors)
        if (t.elements == 0)
          fail(i, "tensor '" + t.name + "' has 0 elements; leave tensors without gradients out of the profile");
      tensors += l.tensors.size();
    }
    for (std::size_t i = 0; i < iteration_seconds.size(); ++i)
      if (!(iteration_seconds[i] > 0) || !std::isfinite(iteration_seconds[i]))
        throw ConfigError("gradsync: profile '" + name + "', iteration_seconds[" + std::to_string(i) + "] = " +
                          std::to_string(iteration_seconds[i]) + " is not a finite number > 0; give measured seconds "
                          "or leave the list out");
    if (tensors == 0)
      throw ConfigError("gradsync: profile '" + name + "' has no parameter tensors: give at least one layer a "
                        "\"tensors\" list (nothing to synchronize otherwise)");
  }

  /// The tensors of every layer, in forward order: what the Synchronizer's ModelLayout would hold.
  ModelLayout layout() const {
    std::vector<LayerSpec> all;
    for (const ComputeLayer& l : layers) all.insert(all.end(), l.tensors.begin(), l.tensors.end());
    return ModelLayout(std::move(all));
  }
  /// For each tensor of layout(), the index of the compute layer that owns it.
  std::vector<std::uint32_t> tensor_owners() const {
    std::vector<std::uint32_t> owner;
    for (std::uint32_t i = 0; i < layers.size(); ++i) owner.insert(owner.end(), layers[i].tensors.size(), i);
    return owner;
  }
  /// Forward plus backward time of one iteration without communication.
  double compute_seconds() const {
    double s = 0;
    for (const ComputeLayer& l : layers) s += l.forward_seconds + l.backward_seconds;
    return s;
  }
  /// Scales every layer's times so that compute_seconds() is `seconds` (nothing where either is 0).
  void scale_compute_to(double seconds) {
    const double total = compute_seconds();
    if (!(total > 0) || !(seconds > 0)) return;
    for (ComputeLayer& l : layers) {
      l.forward_seconds *= seconds / total;
      l.backward_seconds *= seconds / total;
    }
  }
  std::size_t parameters() const {
    std::size_t n = 0;
    for (const ComputeLayer& l : layers)
      for (const LayerSpec& t : l.tensors) n += t.elements;
    return n;
  }
};

}  // namespace gradsync::sim
