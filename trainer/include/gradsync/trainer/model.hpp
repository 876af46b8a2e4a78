#pragma once
// Model: a module tree plus what the trainer and the synchronizer need from it - the parameter list
// in forward order (the synchronizer's "layers"), buffers, seeded initialisation - and the builders
// for the named architectures.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gradsync/trainer/layers.hpp"

namespace gradsync::trainer {

struct ModelConfig {
  std::string name = "resnet20";
  double width = 1.0;             ///< channel / hidden-size multiplier
  Shape input = {1, 28, 28};      ///< one sample: [C, H, W], or [T] token ids for lstm-lm
  std::size_t classes = 10;       ///< classes, or the vocabulary size for lstm-lm
};

class Model {
 public:
  Model(ModelConfig config, ModulePtr root);

  Tensor forward(const Tensor& x, Context& ctx) { return root_->forward(x, ctx); }
  Tensor backward(const Tensor& dy, Context& ctx) { return root_->backward(dy, ctx); }

  /// Parameters in forward order; params()[i]->index == i.
  const std::vector<Param*>& params() const { return params_; }
  std::vector<Tensor*> buffers() const;
  std::size_t parameter_count() const;
  /// Fills every parameter from its init rule with a counter-based generator keyed by a hash of
  /// (seed, index): every replica built with the same seed starts bit-identical, and different seeds
  /// draw unrelated numbers.
  void initialize(std::uint64_t seed);
  /// (name, elements) per parameter tensor, forward order: what the synchronizer's layout needs.
  std::vector<std::pair<std::string, std::size_t>> layout() const;
  const ModelConfig& config() const { return config_; }
  /// Labels per sample the loss expects: 1 for classifiers, T for the language model.
  std::size_t labels_per_sample() const;

 private:
  ModelConfig config_;
  ModulePtr root_;
  std::vector<Param*> params_;
};

/// Builds one of model_names() for config.input and config.classes; throws gradsync::ConfigError
/// naming the valid models for an unknown name or an input the architecture cannot take.
std::unique_ptr<Model> make_model(const ModelConfig& config);
const std::vector<std::string>& model_names();

}  // namespace gradsync::trainer
