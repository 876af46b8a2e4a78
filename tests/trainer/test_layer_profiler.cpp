// gradsync-train --profile: the LayerProfiler's profile of a real run, read back with gradsync-sim's reader.
#include <algorithm>
#include <catch2/catch.hpp>

#include <filesystem>

#include "gradsync/trainer/layer_profiler.hpp"
#include "gradsync/trainer/trainer.hpp"
#include <gradsync/sim/profile_json.hpp>
#include "small_config.hpp"

using namespace gradsync::trainer;

TEST_CASE("A run's profile has the model's layout and positive per-layer times", "[trainer][profile]") {
  TrainConfig c = test::small_resnet_config();
  c.epochs = 0;
  c.iterations = 5;
  c.evaluate = false;
  LayerProfiler profiler;
  c.profiler = &profiler;
  train(c);
  CHECK(profiler.iterations() == 5);

  const std::string path = (std::filesystem::temp_directory_path() / "gradsync_test_trainer_profile.json").string();
  profiler.write(path, c.model.name);
  const gradsync::sim::Profile p = gradsync::sim::read_profile(path);
  std::filesystem::remove(path);

  CHECK(p.name == "resnet20");
  const auto expected = make_model(c.model)->layout();
  const gradsync::ModelLayout layout = p.layout();
  REQUIRE(layout.num_layers() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(layout.layer(i).name == expected[i].first);
    CHECK(layout.layer(i).elements == expected[i].second);
  }
  // The input layer first (no tensors), then one layer per module with parameters.
  REQUIRE(p.layers.size() >= 2);
  CHECK(p.layers.front().name == "input");
  CHECK(p.layers.front().tensors.empty());
  for (std::size_t l = 1; l < p.layers.size(); ++l) {
    INFO(p.layers[l].name);
    CHECK_FALSE(p.layers[l].tensors.empty());
    CHECK(p.layers[l].forward_seconds > 0);
    CHECK(p.layers[l].backward_seconds > 0);
  }
  CHECK(p.compute_seconds() > 0);
  // The per-iteration totals after the 2 warm-up iterations, for gradsync-sim's rank skew; the
  // layers' times add up to their median.
  REQUIRE(p.iteration_seconds.size() == 3);
  std::vector<double> totals = p.iteration_seconds;
  std::sort(totals.begin(), totals.end());
  CHECK(p.compute_seconds() == Approx(totals[1]));
}

TEST_CASE("A profile needs a recorded iteration - evaluations between steps add no layer", "[trainer][profile]") {
  LayerProfiler empty;
  CHECK_THROWS_AS(empty.profile("x"), std::logic_error);

  // Evaluations flush (wait_for + step outside a training step): still one sample per iteration and
  // the same layers.
  TrainConfig c = test::small_resnet_config();
  c.epochs = 0;
  c.iterations = 3;
  c.evaluate_every = 1;
  LayerProfiler profiler(0);
  c.profiler = &profiler;
  train(c);
  CHECK(profiler.iterations() == 3);
  CHECK(profiler.profile("resnet20").layout().num_layers() == make_model(c.model)->layout().size());
}

TEST_CASE("A profile of the first iterations leaves out the one under way, and keep bounds the record",
          "[trainer][profile]") {
  // The input layer alone (no parameters): one span per iteration.
  auto record = [](LayerProfiler& p, std::initializer_list<double> seconds) {
    for (double s : seconds) {
      p.begin_iteration();
      p.add(LayerProfiler::forward, {}, s);
    }
  };
  LayerProfiler all(1);
  record(all, {5.0, 1.0, 2.0, 3.0, 0.1});  // the fifth is under way
  const gradsync::sim::Profile finished = all.profile("x", 4);
  CHECK(finished.compute_seconds() == Approx(2.0));  // iterations 2-4, after the warm-up
  CHECK(finished.iteration_seconds == std::vector<double>{1.0, 2.0, 3.0});
  CHECK(all.profile("x").compute_seconds() == Approx(1.5));  // with the fifth's 0.1

  LayerProfiler kept(1, 3);
  record(kept, {5.0, 1.0, 2.0, 3.0, 0.1});
  CHECK(kept.iterations() == 5);
  CHECK(kept.profile("x").iteration_seconds == std::vector<double>{1.0, 2.0});
  CHECK(kept.profile("x").compute_seconds() == Approx(1.5));
}
