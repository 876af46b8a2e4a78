#include "datasets.hpp"

#include <gradsync/core/error.hpp>

namespace gradsync::trainer {

namespace {

Datasets load_data(const TrainConfig& cfg) {
  if (cfg.dataset == "fashion-mnist") {
    if (cfg.model.input != Shape{1, 28, 28})
      throw ConfigError("fashion-mnist images are [1, 28, 28]; the model input is " + to_string(cfg.model.input));
    if (cfg.model.classes != 10) throw ConfigError("fashion-mnist has 10 classes");
    return {load_fashion_mnist(true, cfg.data_dir), load_fashion_mnist(false, cfg.data_dir)};
  }
  if (cfg.dataset == "synthetic") {
    // One draw split in two, so the test samples share the training samples' class patterns.
    const std::size_t n = cfg.synthetic_train + cfg.synthetic_test;
    Dataset all = cfg.model.name == "lstm-lm"
                      ? synthetic_tokens(cfg.model.input.at(0), cfg.model.classes, n, cfg.seed)
                      : synthetic_images(cfg.model.input, cfg.model.classes, n, cfg.seed);
    Dataset test = split_tail(all, cfg.synthetic_test);
    return {std::move(all), std::move(test)};
  }
  throw ConfigError("unknown dataset '" + cfg.dataset + "' (valid: fashion-mnist, synthetic)");
}

}  // namespace

Datasets load_datasets(const TrainConfig& cfg) {
  Datasets d = load_data(cfg);
  if (cfg.evaluate_samples && cfg.evaluate_samples < d.test.size()) {
    Dataset copy = d.test;
    d.test_sample = split_tail(copy, cfg.evaluate_samples);
  }
  return d;
}

}  // namespace gradsync::trainer
