// The trainer over the library's Synchronizer (in-process ranks): P3 and wait-free-backprop
// policies agree with the exact reference all-reduce.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "library_run.hpp"
#include "small_config.hpp"

using namespace gradsync::trainer;
using test::LibraryRun;

namespace {
void require_close(const TrainResult& a, const TrainResult& b) {
  REQUIRE(a.weights.size() == b.weights.size());
  for (std::size_t t = 0; t < a.weights.size(); ++t)
    for (std::size_t i = 0; i < a.weights[t].size(); ++i) REQUIRE(a.weights[t][i] == Approx(b.weights[t][i]).margin(1e-4));
}
}  // namespace

TEST_CASE("P3 and WFBP policies train like the exact all-reduce (lossless codec)", "[trainer][sync]") {
  const TrainConfig c = test::small_resnet_config();
  const TrainResult exact = train(c);  // LocalAllReduceGroup
  LibraryRun p3(2, {.slicing = "fixed:40", .priority = "forward", .codec = "fp32", .collective = "ring"});
  LibraryRun wfbp(2, {.slicing = "whole", .priority = "fifo", .codec = "fp32", .collective = "ring"});
  const TrainResult a = train(c, p3.factory()), b = train(c, wfbp.factory());
  require_close(a, exact);
  require_close(b, exact);
  CHECK(a.test_accuracy == Approx(exact.test_accuracy).margin(0.01));
  CHECK(b.test_accuracy == Approx(exact.test_accuracy).margin(0.01));
  CHECK(exact.test_accuracy > 0.5);  // 4 classes: it learned something
}

// Error feedback keeps per-rank residuals in the synchronizer, and QSGD keys its rounding on the
// synchronizer's iteration; a resume that dropped either would send different gradients from the
// first resumed iteration on.
TEST_CASE("Checkpoint + resume with lossy codecs is bit-identical (residuals, iteration restored)", "[trainer][sync]") {
  for (const std::string codec : {"onebit:bypass=0", "topk:0.05:bypass=0", "ef+qsgd4:bypass=0", "qsgd4:bypass=0"}) {
    CAPTURE(codec);
    const gradsync::PolicyNames policies{.slicing = "fixed:300", .priority = "forward", .codec = codec, .collective = "ring"};
    const std::string whole = "gradsync_test_ef_whole.ckpt", part = "gradsync_test_ef_part.ckpt";
    TrainConfig c = test::small_resnet_config();
    c.epochs = 0;
    c.iterations = 8;
    c.evaluate = false;
    c.checkpoint = whole;
    LibraryRun run_whole(2, policies);
    const TrainResult uninterrupted = train(c, run_whole.factory());

    c.checkpoint = part;
    c.stop_after = 4;
    LibraryRun first_half(2, policies);
    train(c, first_half.factory());
    // The residuals are really there (nonzero), one file per rank.
    const bool residuals = codec.find("qsgd4") == std::string::npos || codec.starts_with("ef+");
    for (std::size_t r = 0; r < 2 && residuals; ++r) {
      std::ifstream in(sync_state_path(part, r), std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), {}};
      REQUIRE(bytes.size() > 1000);
      CHECK(bytes.find_first_not_of('\0', bytes.size() / 2) != std::string::npos);
    }
    c.stop_after = 0;
    c.resume = part;
    LibraryRun second_half(2, policies);
    const TrainResult resumed = train(c, second_half.factory());
    CHECK(resumed.iterations == 4);
    CHECK(resumed.weights == uninterrupted.weights);

    // Mismatches are named: another codec, another model, a missing rank file.
    gradsync::PolicyNames fp32 = policies;
    fp32.codec = "fp32";
    LibraryRun other_codec(2, fp32);
    CHECK_THROWS_WITH(train(c, other_codec.factory()), Catch::Contains("synchronization") && Catch::Contains("fp32"));
    TrainConfig other_model = c;
    other_model.model.width = 0.25;
    LibraryRun wider(2, policies);
    CHECK_THROWS_WITH(train(other_model, wider.factory()), Catch::Contains("width"));
    if (residuals) {
      std::filesystem::remove(sync_state_path(part, 1));
      LibraryRun missing(2, policies);
      CHECK_THROWS_WITH(train(c, missing.factory()), Catch::Contains(".rank1") && Catch::Contains("codec state"));
    }
    for (const auto& f : {whole, part})
      for (const auto& path : {f, sync_state_path(f, 0), sync_state_path(f, 1)}) std::filesystem::remove(path);
  }
}
