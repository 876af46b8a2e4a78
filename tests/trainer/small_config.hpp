#pragma once
// Test helper: a ResNet-20 run small enough for a unit test that still learns (4 synthetic classes).
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::test {

inline TrainConfig small_resnet_config() {
  TrainConfig c;
  c.model = {.name = "resnet20", .width = 0.125, .input = {1, 10, 10}, .classes = 4};
  c.dataset = "synthetic";
  c.synthetic_train = 512;
  c.synthetic_test = 256;
  c.batch = 16;
  c.epochs = 4;
  c.lr = 0.05f;
  c.ranks = 2;
  c.threads = 2;
  c.progress = false;
  return c;
}

}  // namespace gradsync::trainer::test
