// Every codec x every collective, on 1-7 in-process ranks: the mean within the codec's error bound
// (exact for fp32), bit-identical on every rank.
#include <catch2/catch.hpp>

#include <cstring>

#include <gradsync/any_synchronizer.hpp>

#include "support/codec_bound.hpp"

using namespace gradsync;

namespace {
/// One iteration of this rank's gradients for `iteration`; returns the aggregates.
std::vector<std::vector<float>> step(AnySynchronizer& sync, int rank, int iteration) {
  const ModelLayout& layout = sync.layout();
  std::vector<std::vector<float>> g(layout.num_layers());
  for (std::size_t l = g.size(); l-- > 0;) {
    g[l].resize(layout.layer(l).elements);
    for (std::size_t i = 0; i < g[l].size(); ++i) g[l][i] = testing::grad_value(rank, l, iteration, i);
    sync.gradient_ready(l, g[l]);
  }
  sync.finish_iteration();
  sync.wait_all();
  return g;
}

std::vector<std::vector<float>> aggregate(int rank, transport::Transport& t, const PolicyNames& names) {
  AnySynchronizer sync(t, testing::uneven_layout(), names);
  return step(sync, rank, 0);
}
}  // namespace

TEST_CASE("every codec x collective gives the mean within the codec's bound on 1-7 ranks") {
  const int ranks = GENERATE(1, 2, 3, 4, 7);
  const std::string collective = GENERATE("ring", "ps", "reduce-broadcast", "hierarchical:2", "hybrid");
  for (const char* codec : {"fp32", "fp16", "bf16", "qsgd4", "qsgd8", "qsgd16"}) {
    CAPTURE(ranks, collective, codec);
    // bypass=0: the test layout's units are small; without it they would all go as fp32
    const std::string spec = std::string(codec) + (std::string_view(codec) == "fp32" ? "" : ":bypass=0");
    const auto got = testing::run_ranks<std::vector<std::vector<float>>>(
        ranks, [&](int r, transport::Transport& t) { return aggregate(r, t, {"fixed:1000", "forward", spec, collective}); });
    for (int r = 1; r < ranks; ++r) REQUIRE(got[r] == got[0]);
    const double worst = testing::worst_error_ratio(got[0], codec, ranks, 0);
    CAPTURE(worst);
    REQUIRE(worst <= 1.0);
    if (ranks > 1 && std::string_view(codec) != "fp32") REQUIRE(worst > 0);  // the codec really ran
  }
}

TEST_CASE("1-bit and top-k through every collective: identical on every rank and finite") {
  const int ranks = GENERATE(1, 2, 3, 4, 7);
  const std::string collective = GENERATE("ring", "ps", "reduce-broadcast", "hierarchical:2", "hybrid");
  for (const char* codec : {"onebit:bypass=0", "topk:0.05:bypass=0"}) {
    CAPTURE(ranks, collective, codec);
    const auto got = testing::run_ranks<std::vector<std::vector<float>>>(
        ranks, [&](int r, transport::Transport& t) { return aggregate(r, t, {"fixed:1000", "forward", codec, collective}); });
    for (int r = 1; r < ranks; ++r) REQUIRE(got[r] == got[0]);
    for (const auto& layer : got[0])
      for (float x : layer) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("iteration() / residuals() / restore(): a restored synchronizer continues bit-identically") {
  for (const char* codec : {"onebit:bypass=0", "topk:0.05:bypass=0", "ef+qsgd4:bypass=0"}) {
    CAPTURE(codec);
    const PolicyNames names{"fixed:1000", "forward", codec, "ring"};
    struct Out {
      std::vector<std::vector<float>> continued, restored, fresh;
      std::int64_t saved_iteration = -1;
      bool nonzero = false, size_checked = false, order_checked = false;
    };
    const auto got = testing::run_ranks<Out>(2, [&](int r, transport::Transport& t) {
      Out o;
      std::vector<float> saved;
      {
        AnySynchronizer a(t, testing::uneven_layout(), names);
        step(a, r, 0);
        saved.assign(a.residuals().begin(), a.residuals().end());
        o.saved_iteration = a.iteration();
        o.continued = step(a, r, 1);
      }
      o.nonzero = std::ranges::any_of(saved, [](float x) { return x != 0.0f; });
      {
        AnySynchronizer b(t, testing::uneven_layout(), names);
        b.restore(o.saved_iteration, saved);
        o.restored = step(b, r, 1);
      }
      {
        AnySynchronizer c(t, testing::uneven_layout(), names);
        o.fresh = step(c, r, 1);  // the control: without the state the result differs
        try {
          c.restore(1, saved);
        } catch (const UsageError&) {
          o.order_checked = true;  // too late: gradients were handed over
        }
      }
      {
        AnySynchronizer d(t, testing::uneven_layout(), names);
        saved.pop_back();
        try {
          d.restore(1, saved);
        } catch (const UsageError&) {
          o.size_checked = true;
        }
      }
      return o;
    });
    for (const Out& o : got) {
      CHECK(o.nonzero);
      CHECK(o.saved_iteration == 1);
      CHECK(o.size_checked);
      CHECK(o.order_checked);
      CHECK(o.restored == o.continued);
      CHECK(o.fresh != o.continued);
    }
  }
  gradsync::transport::InProcessGroup solo(1);
  AnySynchronizer fp32(solo.rank(0), testing::uneven_layout(), {"fixed:1000", "forward", "fp32", "ring"});
  CHECK(fp32.residuals().empty());
  CHECK_THROWS_WITH(fp32.restore(0, std::vector<float>(3)), Catch::Contains("same model, slicing, priority, codec and collective"));
}
