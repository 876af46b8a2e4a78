// End to end: reproducibility, checkpoint + resume, and (label slow) real accuracy on Fashion-MNIST.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gradsync/trainer/trainer.hpp"
#include "resume.hpp"

using namespace gradsync::trainer;

namespace {
// A small model with every stateful piece: batch norm (running stats), dropout (keyed masks).
TrainConfig small_config() {
  TrainConfig c;
  c.model = {.name = "alexnet-bn", .width = 0.0625, .input = {1, 12, 12}, .classes = 4};
  c.dataset = "synthetic";
  c.synthetic_train = 256;
  c.synthetic_test = 64;
  c.batch = 16;
  c.iterations = 12;
  c.lr = 0.05f;
  c.warmup_epochs = 0.5;
  c.ranks = 2;
  c.threads = 2;
  c.progress = false;
  return c;
}
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradsync_test_" + name)).string();
}
}  // namespace

TEST_CASE("Same seed and configuration give bit-identical weights", "[trainer][training]") {
  const TrainConfig c = small_config();
  const TrainResult a = train(c), b = train(c);
  REQUIRE(a.weights.size() == b.weights.size());
  CHECK(a.weights == b.weights);
  TrainConfig other = c;
  other.seed = 2;
  CHECK(train(other).weights != a.weights);
}

TEST_CASE("Checkpoint + resume is bit-identical to an uninterrupted run", "[trainer][training]") {
  const std::string whole = temp_path("whole.ckpt"), part = temp_path("part.ckpt");
  TrainConfig c = small_config();
  c.checkpoint = whole;
  const TrainResult uninterrupted = train(c);

  // "preempted" mid-epoch (8 iterations per epoch)
  const TrainResult resumed = test::stop_and_resume(c, part, 5, [](const TrainConfig& t) { return train(t); });
  CHECK(resumed.iterations == 7);
  CHECK(resumed.weights == uninterrupted.weights);
  CHECK(read_all(part) == read_all(whole));  // weights, momentum and batch-norm statistics

  TrainConfig wrong = c;
  wrong.batch = 8;
  CHECK_THROWS_WITH(train(wrong), Catch::Contains("batch") && Catch::Contains("same configuration"));
  std::filesystem::remove(whole);
  std::filesystem::remove(part);
}

// --eval-samples speeds up the evaluations every N iterations (time to accuracy); the accuracy a
// run reports at its end is on the whole test set.
TEST_CASE("Evaluations every N iterations use the sample and epoch ends the whole test set", "[trainer][training]") {
  TrainConfig c = small_config();  // 8 iterations per epoch: epoch ends at 8 and 12
  c.evaluate_every = 2;
  const TrainResult whole = train(c);
  c.evaluate_samples = 5;
  const TrainResult sampled = train(c);
  CHECK(sampled.weights == whole.weights);
  REQUIRE(sampled.evaluations.size() == 6);
  REQUIRE(whole.evaluations.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    const Evaluated &s = sampled.evaluations[i], &w = whole.evaluations[i];
    CAPTURE(s.iteration);
    REQUIRE(s.iteration == w.iteration);
    if (s.iteration == 8 || s.iteration == 12) {
      CHECK(s.test_loss == w.test_loss);
      CHECK(s.test_accuracy == w.test_accuracy);
    } else {
      CHECK(s.test_loss != w.test_loss);
      CHECK(s.test_accuracy * 5 == Approx(std::round(s.test_accuracy * 5)).margin(1e-9));
    }
  }
  CHECK(sampled.test_accuracy == whole.test_accuracy);
}

TEST_CASE("Several ranks with the exact all-reduce train like one rank on the whole batch",
          "[trainer][training]") {
  // BN statistics are per rank, so compare a model without batch norm.
  TrainConfig c = small_config();
  c.model = {.name = "lstm", .width = 0.125, .input = {1, 6, 6}, .classes = 4};
  c.iterations = 6;
  c.ranks = 2;
  c.batch = 8;
  const TrainResult two = train(c);
  c.ranks = 1;
  c.batch = 16;
  const TrainResult one = train(c);
  REQUIRE(two.weights.size() == one.weights.size());
  for (std::size_t t = 0; t < one.weights.size(); ++t)
    for (std::size_t i = 0; i < one.weights[t].size(); ++i)
      REQUIRE(two.weights[t][i] == Approx(one.weights[t][i]).margin(1e-5));
}

TEST_CASE("Bad training configurations are rejected with clear errors", "[trainer][training]") {
  TrainConfig c = small_config();
  c.dataset = "cifar";
  CHECK_THROWS_WITH(train(c), Catch::Contains("unknown dataset 'cifar'"));
  c = small_config();
  c.dataset = "fashion-mnist";
  CHECK_THROWS_WITH(train(c), Catch::Contains("[1, 28, 28]"));
  c = small_config();
  c.lr_schedule = "exp";
  CHECK_THROWS_WITH(train(c), Catch::Contains("'exp'"));
  c = small_config();
  c.lr = 1e6f;
  CHECK_THROWS_WITH(train(c), Catch::Contains("diverged"));
}
