// 03: policies chosen at compile time, with their knobs set by name, and error feedback around a
// lossy codec.
//
// The Synchronizer's four template arguments pick the algorithms (the compiler checks they fit
// together: a concept names the fix when they do not); runtime knobs go in Options and in each
// policy object, named in Policies. Here 8-bit QSGD compresses gradients about 4x. On its own its
// rounding error is random and averages out only slowly (as 1/sqrt(iterations));
// ErrorFeedback<Qsgd<8>> keeps each unit's error in a residual and sends it again later, so over
// many iterations the aggregates add up to the true sum (the error of their average falls as
// 1/iterations). The program runs both on four in-process ranks, each with a fixed gradient, and
// checks that the average of the aggregates is much closer to the true mean with error feedback.
// (Error feedback needs a codec whose error is smaller than the value: with 2-bit QSGD the
// residual can grow instead; 1-bit and top-k keep their own residual.)
#include <gradsync/gradsync.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;

constexpr int ranks = 4, iterations = 100;
const gs::ModelLayout layout{{"conv.weight", 20'000}, {"fc.weight", 5'000}, {"fc.bias", 10}};

/// Rank r's gradient of layer l (the same every iteration).
float gradient(int r, std::size_t l, std::size_t i) { return std::sin(0.37f * float(i + 1) * float(r + 1 + l)); }

struct Result {
  double error = 0;  ///< |average of the aggregates - true mean| / |true mean|, over all elements
  gs::Statistics stats;
};

template <class Codec>
Result averaged_error(Codec codec) {
  using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, Codec, gs::collective::Ring>;
  Result result;
  example::on_ranks(ranks, [&](int rank, gs::transport::Transport& t) {
    Sync sync{t, layout,
              {.credit_bytes = 1u << 20, .inflight_units = 2, .seed = 42},         // Options
              {.slicing = {.max_elements = 4096}, .codec = codec, .collective = {.segment_bytes = 64u << 10}}};
    std::vector<std::vector<float>> grad(layout.num_layers()), total(layout.num_layers());
    for (std::size_t l = 0; l < layout.num_layers(); ++l) total[l].assign(layout.layer(l).elements, 0.0f);
    for (int it = 0; it < iterations; ++it) {
      for (std::size_t l = layout.num_layers(); l-- > 0;) {
        grad[l].resize(layout.layer(l).elements);
        for (std::size_t i = 0; i < grad[l].size(); ++i) grad[l][i] = gradient(rank, l, i);
        sync.gradient_ready(l, grad[l]);
      }
      sync.finish_iteration();
      for (std::size_t l = 0; l < layout.num_layers(); ++l) {
        sync.wait_for(l);
        for (std::size_t i = 0; i < grad[l].size(); ++i) total[l][i] += grad[l][i];
      }
    }
    if (rank != 0) return;
    double diff = 0, norm = 0;
    for (std::size_t l = 0; l < layout.num_layers(); ++l)
      for (std::size_t i = 0; i < total[l].size(); ++i) {
        double mean = 0;
        for (int r = 0; r < ranks; ++r) mean += gradient(r, l, i) / ranks;
        diff += std::pow(total[l][i] / iterations - mean, 2);
        norm += mean * mean;
      }
    result = {std::sqrt(diff / norm), sync.stats()};
  });
  return result;
}

int main() {
  return example::run([] {
    // Knobs of the codec: 1024 elements per scale; bypass_below = 0 compresses even the 10-element
    // bias (by default tensors that small go as fp32, see codec/bypass.hpp).
    const gs::codec::Qsgd<8> qsgd{.bucket = 1024, .bypass_below = 0};
    const Result plain = averaged_error(qsgd);
    const Result ef = averaged_error(gs::codec::ErrorFeedback<gs::codec::Qsgd<8>>{qsgd});
    std::printf("relative error of the averaged aggregate after %d iterations: qsgd8 %.2e, ef+qsgd8 %.2e\n",
                iterations, plain.error, ef.error);
    // What a ring sends of fp32 gradients: 2(N-1)/N of the model per rank and iteration.
    const double fp32_bytes = 2.0 * (ranks - 1) / ranks * 4.0 * double(layout.total_elements()) * iterations;
    std::printf("rank 0 sent %.2f MB (fp32: %.2f MB)\n", ef.stats.bytes_sent / 1e6, fp32_bytes / 1e6);
    example::check(ef.stats.compressed_share() == 1.0, "every element went through the codec");
    example::check(double(ef.stats.bytes_sent) * 3 < fp32_bytes, "8-bit QSGD sends less than 1/3 of fp32");
    example::check(ef.error < 0.5 * plain.error, "error feedback halves the error of the averaged aggregate at least");
  });
}
