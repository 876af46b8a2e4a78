#pragma once
// The data one train() call reads: the training set, the test set, and the test set's tail that
// the evaluations between epoch ends use (TrainConfig::evaluate_samples).
#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer {

struct Datasets {
  Dataset train, test;
  Dataset test_sample;  // TrainConfig::evaluate_samples' tail of test, if set: the evaluations between epoch ends
};

/// Loads (Fashion-MNIST) or draws (synthetic) the data `cfg` names; ConfigError where the model's
/// input or classes do not fit it.
Datasets load_datasets(const TrainConfig& cfg);

}  // namespace gradsync::trainer
