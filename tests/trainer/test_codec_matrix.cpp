// Every trainer model x every codec x every in-process collective x 2, 3 and 4 ranks, 2
// iterations, on the models' real tensor shapes (at widths where, as in the full models, the
// largest tensors are cut into P3 slices of 40,000 and the smallest fall under the bypass
// threshold): nothing throws, every rank ends bit-identical, the codec really compresses more than
// 99% of the parameters, and the bytes on the wire are the codec's ratio of fp32's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gradsync/trainer/library_sync.hpp"
#include "support/ranks.hpp"

using namespace gradsync;

namespace {
const char* const kCodecs[] = {"fp32", "fp16", "bf16", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "onebit", "topk", "ef+qsgd4", "ef+fp16"};
const char* const kCollectives[] = {"ring", "ps", "reduce-broadcast", "hierarchical", "hybrid"};

struct Outcome {
  std::vector<std::vector<float>> last;  // the second iteration's aggregates
  Statistics stats;
  double expected_ratio = 0;  // wire bytes / fp32's, from the codec's payload size and the bypassed units
};

Outcome run(int rank, transport::Transport& t, const ModelLayout& layout, const std::string& codec,
            const std::string& collective) {
  AnySynchronizer sync(t, layout, {"fixed:40000", "forward", codec, collective});
  Outcome out;
  std::vector<std::vector<float>> g(layout.num_layers());
  for (int it = 0; it < 2; ++it) {
    for (std::size_t l = g.size(); l-- > 0;) {
      g[l].resize(layout.layer(l).elements);
      for (std::size_t i = 0; i < g[l].size(); ++i) g[l][i] = testing::grad_value(rank, l, it, i);
      sync.gradient_ready(l, g[l]);
    }
    sync.finish_iteration();
    sync.wait_all();
  }
  out.last = std::move(g);
  out.stats = sync.stats();
  // The codec's payload per element, from a large multiple of any bucket (headers negligible).
  const auto c = codec::AnyCodec::parse(codec);
  constexpr std::size_t big = std::size_t{1} << 20;
  const double ratio = c.traits().lossless ? 1.0 : double(c.encoded_bytes(big) - codec::header_bytes) / double(4 * big);
  double weighted = 0;
  for (std::size_t u = 0; u < sync.units().size(); ++u)
    weighted += double(sync.units()[u].elements) * (sync.bypassed(u) ? 1.0 : ratio);
  out.expected_ratio = weighted / double(layout.total_elements());
  return out;
}

void matrix(const std::string& model, double width, std::size_t classes = 10) {
  trainer::ModelConfig config{.name = model, .width = width, .input = {1, 28, 28}, .classes = classes};
  if (model == "lstm-lm") config.input = {32};
  const ModelLayout layout = trainer::layout_of(*trainer::make_model(config));
  for (const char* collective : kCollectives)
    for (int ranks : {2, 3, 4}) {
      std::uint64_t fp32_bytes = 0;
      for (const std::string codec : kCodecs) {
        CAPTURE(model, width, collective, ranks, codec);
        const auto got = testing::run_ranks<Outcome>(ranks, [&](int r, transport::Transport& t) {
          return run(r, t, layout, codec, collective);
        });
        std::uint64_t bytes = 0;
        for (int r = 0; r < ranks; ++r) {
          REQUIRE(got[r].last == got[0].last);  // identical replicas
          bytes += got[r].stats.bytes_sent;
        }
        for (const auto& layer : got[0].last) REQUIRE(std::ranges::all_of(layer, [](float x) { return std::isfinite(x); }));
        const Statistics& s = got[0].stats;
        REQUIRE(s.elements == 2 * layout.total_elements());
        if (codec == "fp32") {
          fp32_bytes = bytes;
          REQUIRE(s.elements_compressed == 0);
          continue;
        }
        // fp16 converts every tensor; the quantizers keep the study's > 99%
        REQUIRE(s.compressed_share() > (codec.find("fp16") != std::string::npos ? 0.9999 : 0.99));
        const double measured = double(bytes) / double(fp32_bytes);
        CAPTURE(measured, got[0].expected_ratio);
        REQUIRE(measured >= 0.97 * got[0].expected_ratio);
        REQUIRE(measured <= 1.25 * got[0].expected_ratio);
      }
    }
}
}  // namespace

TEST_CASE("codec matrix: resnet20 (width 1)", "[trainer][matrix]") { matrix("resnet20", 1.0); }
TEST_CASE("codec matrix: resnet18", "[trainer][matrix]") { matrix("resnet18", 0.1875); }
TEST_CASE("codec matrix: resnet50", "[trainer][matrix]") { matrix("resnet50", 0.1875); }
TEST_CASE("codec matrix: vgg11", "[trainer][matrix]") { matrix("vgg11", 0.125); }
TEST_CASE("codec matrix: vgg16", "[trainer][matrix]") { matrix("vgg16", 0.125); }
TEST_CASE("codec matrix: vgg19", "[trainer][matrix]") { matrix("vgg19", 0.125); }
TEST_CASE("codec matrix: alexnet-bn", "[trainer][matrix]") { matrix("alexnet-bn", 0.125); }
TEST_CASE("codec matrix: lstm (width 1)", "[trainer][matrix]") { matrix("lstm", 1.0); }
TEST_CASE("codec matrix: lstm-lm", "[trainer][matrix]") { matrix("lstm-lm", 0.25, 1000); }
