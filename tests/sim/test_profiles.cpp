// Built-in profiles against published parameter counts, and the JSON profile reader's errors.
#include <catch2/catch.hpp>
#include <filesystem>

#include <gradsync/sim/models.hpp>
#include <gradsync/sim/profile_json.hpp>

namespace sim = gradsync::sim;

TEST_CASE("built-in profiles have the published layer sizes", "[sim][profile]") {
  // torchvision's counts (ResNet-50: 25,557,032 in 161 tensors; VGG-19: 143,667,240).
  const auto resnet50 = sim::builtin_profile("resnet50", {});
  CHECK(resnet50.parameters() == 25'557'032);
  CHECK(resnet50.layout().num_layers() == 161);
  CHECK(resnet50.layout().layer(0).name == "conv1.weight");
  CHECK(resnet50.layout().layer(160).name == "fc.bias");
  const auto vgg19 = sim::builtin_profile("vgg19", {});
  CHECK(vgg19.parameters() == 143'667'240);
  // P3, Figure 5: VGG-19's first fully connected layer holds 71.5% of its parameters
  // (25088 * 4096 + 4096 = 102,764,544).
  std::size_t fc0 = 0;
  const gradsync::ModelLayout layout = vgg19.layout();
  for (const auto& t : layout.layers())
    if (t.name.starts_with("classifier.0.")) fc0 += t.elements;
  CHECK(fc0 == 102'764'544);
  CHECK(double(fc0) / double(vgg19.parameters()) == Approx(0.715).margin(0.0005));
  // The trainer's models at 1x28x28 (hand-counted from trainer/src/models.cpp): VGG-11's
  // convolutions 9,219,328 + classifier 4608*4096+4096 + 4096*4096+4096 + 4096*10+10;
  // ResNet-20: conv1 144 + bn1 32 + three stages 14,016 + 51,648 + 205,696 + fc 650.
  CHECK(sim::builtin_profile("vgg11", {}).parameters() == 9'219'328 + 18'878'464 + 16'781'312 + 40'970);
  CHECK(sim::builtin_profile("resnet20", {}).parameters() == 144 + 32 + 14'016 + 51'648 + 205'696 + 650);
  // FLOP-based times: ResNet-20's first convolution, 2 * 1*9*16 * 28*28 FLOPs per sample, batch 32,
  // at 100 GFLOP/s; backward twice that.
  const auto r20 = sim::builtin_profile("resnet20", {});
  CHECK(r20.layers[0].forward_seconds == Approx(2.0 * 144 * 784 * 32 / 100e9));
  CHECK(r20.layers[0].backward_seconds == Approx(2 * r20.layers[0].forward_seconds));
  // Sockeye as P3's artifact trains it, hand-counted: source embedding 17192*512; bidirectional
  // LSTM 2 * (1024*512 + 1024 + 1024*256 + 1024); LSTM 2048*512 + 2048 + 2048*512 + 2048;
  // att_e2h 512*512 + 4 * (512*512 + 512) initial states; decoder: target embedding 7710*512,
  // LSTMs 2048*1024 + 2048*512 + 2 * 2048 and 2048*512 * 2 + 2 * 2048, attention 512*512 + 512,
  // hidden 512*1024 + 512; output 7710*512 + 7710. The heaviest tensor is the first (Figure 5(c)).
  const auto sockeye = sim::builtin_profile("sockeye", {});
  CHECK(sockeye.parameters() == 8'802'304 + 1'576'960 + 2'101'248 + 1'312'768 +
                                    (3'947'520 + 3'149'824 + 2'101'248 + 262'656 + 524'800) + 3'955'230);
  const gradsync::ModelLayout s_layout = sockeye.layout();
  CHECK(s_layout.layer(0).name == "source_embed_weight");
  for (const auto& t : s_layout.layers()) CHECK(t.elements <= s_layout.layer(0).elements);
  CHECK(sockeye.layers.front().forward_seconds == 0);  // a lookup
  CHECK_THROWS_WITH(sim::builtin_profile("sockeye", {.classes = 10}), Catch::Contains("drop --input and --classes"));
  // The toys.
  CHECK(sim::builtin_profile("p3-fig4", {}).compute_seconds() == 6);
  CHECK(sim::builtin_profile("p3-fig6", {}).layers[1].tensors[0].elements == 3 * 31'250'000);
  CHECK_THROWS_WITH(sim::builtin_profile("resnet51", {}), Catch::Contains("valid: resnet50"));
  CHECK_THROWS_WITH(sim::builtin_profile("resnet50", {.input = {3, 0, 224}}), Catch::Contains("three positive sizes"));
  CHECK(sim::builtin_profile("resnet50", {.input = {3, 32, 32}, .classes = 10}).parameters() ==
        25'557'032 - 2048 * 990 - 990);  // only the classifier changes with the input and classes
}

TEST_CASE("profiles round-trip through JSON", "[sim][profile]") {
  const auto p = sim::builtin_profile("resnet20", {});
  const auto q = sim::profile_from_json(sim::profile_json(p), "memory");
  REQUIRE(q.layers.size() == p.layers.size());
  CHECK(q.name == "resnet20");
  CHECK(q.parameters() == p.parameters());
  CHECK(q.compute_seconds() == Approx(p.compute_seconds()));
  CHECK(q.layout().signature() == p.layout().signature());
  CHECK(q.iteration_seconds.empty());
  auto measured = p;
  measured.iteration_seconds = {0.25, 0.5, 0.125};
  CHECK(sim::profile_from_json(sim::profile_json(measured), "memory").iteration_seconds == measured.iteration_seconds);
}

TEST_CASE("bad profile JSON is refused, naming the field and the fix", "[sim][profile]") {
  auto refuse = [](const char* text, const char* why) {
    CAPTURE(text);
    CHECK_THROWS_WITH(sim::profile_from_json(nlohmann::json::parse(text), "p.json"),
                      Catch::Contains(why) && Catch::Contains("p.json"));
  };
  refuse(R"([1, 2])", "expected an object");
  refuse(R"({"model": "x"})", "layers: expected a non-empty array");
  refuse(R"({"layers": []})", "non-empty array");
  refuse(R"({"layers": [{"backward_seconds": 1, "tensors": [{"elements": 4}]}]})",
         "layers[0]: missing \"forward_seconds\"");
  refuse(R"({"layers": [{"forward_seconds": -1, "backward_seconds": 1, "tensors": [{"elements": 4}]}]})",
         "layers[0].forward_seconds: expected seconds as a number >= 0, got -1");
  refuse(R"({"layers": [{"forward_seconds": "fast", "backward_seconds": 1}]})", "got \"fast\"");
  refuse(R"({"layers": [{"forward_seconds": 1, "backward_seconds": 1, "tensors": [{"elements": 0}]}]})",
         "layers[0].tensors[0].elements: expected a whole number >= 1");
  refuse(R"({"layers": [{"forward_seconds": 1, "backward_seconds": 1, "tensors": [{"elements": 2.5}]}]})",
         "whole number");
  refuse(R"({"layers": [{"forward_seconds": 1, "backward_seconds": 1, "tensors": {"elements": 3}}]})",
         "tensors: expected an array");
  refuse(R"({"layers": [{"forward_seconds": 1, "backward_seconds": 1}]})", "no parameter tensors");
  refuse(R"({"gradsync_profile": 2, "layers": [{"forward_seconds": 1, "backward_seconds": 1}]})", "version 2");
  const std::string one = R"({"layers": [{"forward_seconds": 1, "backward_seconds": 1, "tensors": [{"elements": 4}]}], )";
  refuse((one + R"("iteration_seconds": 0.5})").c_str(), "iteration_seconds: expected an array");
  refuse((one + R"("iteration_seconds": [0.5, 0]})").c_str(), "iteration_seconds[1]: expected seconds as a number > 0, got 0");
  // Not JSON at all, or no file: the reader says so.
  const std::string path = (std::filesystem::temp_directory_path() / "gradsync_test_sim_profile.json").string();
  std::ofstream(path) << "{ layers: oops";
  CHECK_THROWS_WITH(sim::read_profile(path), Catch::Contains("is not valid JSON"));
  CHECK_THROWS_WITH(sim::read_profile("no/such/file.json"), Catch::Contains("cannot open profile no/such/file.json"));
  // A good one reads.
  std::ofstream(path) << R"({"gradsync_profile": 1, "model": "tiny", "layers": [
      {"name": "fc", "forward_seconds": 0.5, "backward_seconds": 1.0, "tensors": [{"name": "fc.weight", "elements": 10}]},
      {"name": "relu", "forward_seconds": 0.1, "backward_seconds": 0.1}]})";
  const auto tiny = sim::read_profile(path);
  CHECK(tiny.name == "tiny");
  CHECK(tiny.parameters() == 10);
  CHECK(tiny.compute_seconds() == Approx(1.7));
}
