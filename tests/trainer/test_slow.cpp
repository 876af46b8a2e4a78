// Label slow: real accuracy on Fashion-MNIST through the whole stack (library Synchronizer, P3).
#include <catch2/catch.hpp>

#include "library_run.hpp"

using namespace gradsync::trainer;
using test::LibraryRun;

TEST_CASE("Fashion-MNIST, 2 in-process ranks with P3 policies: >= 85% test accuracy in < 5 minutes",
          "[trainer][slow]") {
  TrainConfig c;
  c.model = {.name = "alexnet-bn", .width = 0.125, .input = {1, 28, 28}, .classes = 10};
  c.batch = 32;
  c.epochs = 1;
  c.lr = 0.05f;
  c.warmup_epochs = 0.2;
  c.ranks = 2;
  c.threads = 2;
  c.progress = false;
  LibraryRun p3(2, {});
  const TrainResult r = train(c, p3.factory());
  INFO("test accuracy " << r.test_accuracy << " in " << r.seconds << " s");
  CHECK(r.test_accuracy >= 0.85);
  CHECK(r.seconds < 300.0);
}
