// The trainer over the library's Synchronizer (in-process ranks): P3 and wait-free-backprop
// policies agree with the exact reference all-reduce.
#include <catch2/catch.hpp>

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
