// Lossy codecs through every collective, as the low-precision study promises them: error feedback
// conserves the gradient mass through every re-encode (nothing is lost for good), QSGD stays
// unbiased and its error does not grow with the rank count, every message of a compressed tensor
// is compressed, and tensors under the bypass threshold travel as exact fp32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <mutex>

#include <gradsync/any_synchronizer.hpp>

#include "support/forwarding.hpp"
#include "support/ranks.hpp"

using namespace gradsync;

namespace {
const std::vector<std::string> kCollectives{"ring", "ps", "reduce-broadcast", "hierarchical:2", "hybrid"};

/// This rank's gradient: a signal every rank shares plus noise of its own, so the mean stays of
/// the same size whatever the rank count (errors can then be compared across rank counts).
float gradient(int rank, std::size_t layer, int iteration, std::size_t i) {
  return testing::grad_value(-1, layer, iteration, i) + 0.3f * testing::grad_value(rank, layer, iteration, i);
}

struct Run {
  std::vector<std::vector<std::vector<float>>> aggregates;  // [iteration][layer][element]
  std::vector<std::vector<float>> residual;                 // [layer][element], after the run
  Statistics stats;
};

/// `iterations` iterations of `gradient` through an AnySynchronizer; the residuals mapped back to
/// the layers' elements.
Run run(int rank, transport::Transport& t, const ModelLayout& layout, const PolicyNames& names, int iterations,
        bool average) {
  AnySynchronizer sync(t, layout, names, Options{.average = average, .seed = 7});
  Run out;
  for (int it = 0; it < iterations; ++it) {
    std::vector<std::vector<float>> g(layout.num_layers());
    for (std::size_t l = g.size(); l-- > 0;) {
      g[l].resize(layout.layer(l).elements);
      for (std::size_t i = 0; i < g[l].size(); ++i) g[l][i] = gradient(rank, l, it, i);
      sync.gradient_ready(l, g[l]);
    }
    sync.finish_iteration();
    sync.wait_all();
    out.aggregates.push_back(std::move(g));
  }
  out.residual.resize(layout.num_layers());
  for (std::size_t l = 0; l < layout.num_layers(); ++l) out.residual[l].assign(layout.layer(l).elements, 0.0f);
  std::size_t at = 0;
  for (std::size_t u = 0; u < sync.units().size() && !sync.residuals().empty(); ++u) {
    if (sync.bypassed(u)) continue;
    for (const Segment& s : sync.units()[u].segments)
      for (std::size_t i = 0; i < s.length; ++i) out.residual[s.layer][s.offset + i] = sync.residuals()[at++];
  }
  out.stats = sync.stats();
  return out;
}

std::vector<Run> run_all(int ranks, const ModelLayout& layout, const PolicyNames& names, int iterations, bool average) {
  return testing::run_ranks<Run>(ranks, [&](int r, transport::Transport& t) {
    return run(r, t, layout, names, iterations, average);
  });
}

const ModelLayout kLayout{{"conv.weight", 9000}, {"conv.bias", 7}, {"fc.weight", 5000}, {"fc.bias", 3}};
}  // namespace

TEST_CASE("error feedback conserves the gradient mass through every collective's re-encodes", "[collective][lossy]") {
  // Sum mode: sum over iterations of the delivered aggregate + every rank's residual at the end
  // == sum over iterations and ranks of the gradients. A collective that re-encodes a partial sum
  // or the aggregate without feeding its error back breaks it.
  const int ranks = GENERATE(2, 3, 4);
  const std::string collective = GENERATE(from_range(kCollectives));
  for (const char* codec : {"onebit:bypass=0", "topk:0.05:bypass=0", "ef+qsgd4:bypass=0", "ef+fp16"}) {
    CAPTURE(ranks, collective, codec);
    constexpr int iterations = 4;
    const auto got = run_all(ranks, kLayout, {"fixed:2000", "forward", codec, collective}, iterations, false);
    for (int r = 1; r < ranks; ++r) REQUIRE(got[r].aggregates == got[0].aggregates);
    double worst = 0, any_residual = 0;
    for (std::size_t l = 0; l < kLayout.num_layers(); ++l)
      for (std::size_t i = 0; i < kLayout.layer(l).elements; ++i) {
        double delivered = 0, sent = 0, kept = 0;
        for (int it = 0; it < iterations; ++it) {
          delivered += got[0].aggregates[it][l][i];
          for (int r = 0; r < ranks; ++r) sent += gradient(r, l, it, i);
        }
        for (int r = 0; r < ranks; ++r) kept += got[r].residual[l][i];
        worst = std::max(worst, std::abs(delivered + kept - sent));
        any_residual = std::max(any_residual, std::abs(kept));
      }
    CAPTURE(worst, any_residual);
    REQUIRE(any_residual > 1e-4);  // the codec really dropped something, which the residuals hold
    REQUIRE(worst < 1e-4 * ranks * iterations);
  }
}

TEST_CASE("QSGD through every collective: unbiased, and its error does not grow with the rank count",
          "[collective][lossy]") {
  // A lossy codec touches an element at most a fixed number of times (collective/ring.hpp): the
  // error of the mean stays of one size from 2 to 8 ranks. A ring that re-quantized partial sums
  // at each of its N-1 hops would grow it about sqrt(N) times.
  const std::string collective = GENERATE(from_range(kCollectives));
  const ModelLayout layout{{"w", 40'000}};
  std::vector<double> rms;
  for (int ranks : {2, 4, 8}) {
    const auto got = run_all(ranks, layout, {"fixed:40000", "forward", "qsgd4", collective}, 3, true);
    double err2 = 0, bias = 0;
    std::size_t count = 0;
    for (int it = 0; it < 3; ++it)
      for (std::size_t i = 0; i < 40'000; ++i) {
        double mean = 0;
        for (int r = 0; r < ranks; ++r) mean += gradient(r, 0, it, i);
        mean /= ranks;
        const double e = got[0].aggregates[it][0][i] - mean;
        err2 += e * e;
        bias += e;
        ++count;
      }
    rms.push_back(std::sqrt(err2 / double(count)));
    CAPTURE(collective, ranks, rms.back(), bias / double(count));
    REQUIRE(rms.back() > 0.01);                                   // quantized for real
    REQUIRE(std::abs(bias / double(count)) < 0.05 * rms.back());  // unbiased: errors cancel on average
  }
  CAPTURE(collective, rms);
  REQUIRE(rms[2] < 1.3 * rms[0]);
}

namespace {
/// Records the first bytes of every message it sends, by tag.
class Recording final : public testing::Forwarding {
 public:
  using Forwarding::Forwarding;
  void send(int dst, transport::Tag tag, std::span<const std::byte> data) override {
    if (tag < transport::reserved_tags) {
      std::lock_guard lock(mutex_);
      headers_.push_back({tag, data.size(), {}});
      std::memcpy(&headers_.back().header, data.data(), std::min(data.size(), sizeof(codec::WireHeader)));
    }
    inner_.send(dst, tag, data);
  }
  struct Sent {
    transport::Tag tag;
    std::size_t bytes;
    codec::WireHeader header;
  };
  std::vector<Sent> sent() const {
    std::lock_guard lock(mutex_);
    return headers_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Sent> headers_;
};
}  // namespace

TEST_CASE("every message of a compressed tensor is compressed - small tensors go as exact fp32", "[collective][lossy]") {
  // Slices of 1,500 elements on 4 ranks: every ring segment is far under the old per-message
  // threshold of 16,384, yet each one must carry the codec. The 40-element bias is under the
  // explicit threshold and goes as fp32, bit-identical to an fp32 run.
  const ModelLayout layout{{"conv.weight", 9000}, {"conv.bias", 40}, {"fc.weight", 3000}};
  const int ranks = GENERATE(2, 4);
  const std::string collective = GENERATE(from_range(kCollectives));
  const std::pair<std::string, int> codecs[] = {
      {"qsgd8:bypass=100", 5}, {"onebit:bypass=100", 7}, {"topk:0.1:bypass=100", 8}, {"fp16:bypass=100", 1}};
  for (const auto& c : codecs) {
    const std::string codec = c.first;
    const int codec_id = c.second;
    CAPTURE(ranks, collective, codec);
    struct Out {
      std::vector<Recording::Sent> sent;
      std::vector<char> bypassed;
      Run lossy, fp32;
    };
    const auto got = testing::run_ranks<Out>(ranks, [&](int r, transport::Transport& t) {
      Out o;
      Recording rec(t);
      o.lossy = run(r, rec, layout, {"fixed:1500", "forward", codec, collective}, 1, true);
      o.sent = rec.sent();
      o.fp32 = run(r, t, layout, {"fixed:1500", "forward", "fp32", collective}, 1, true);
      AnySynchronizer probe(t, layout, {"fixed:1500", "forward", codec, collective});
      for (std::size_t u = 0; u < probe.units().size(); ++u) o.bypassed.push_back(probe.bypassed(u));
      return o;
    });
    REQUIRE(std::count(got[0].bypassed.begin(), got[0].bypassed.end(), 1) == 1);  // the bias alone
    for (int r = 0; r < ranks; ++r)
      for (const Recording::Sent& s : got[r].sent) {
        CAPTURE(r, s.tag, s.bytes);
        if (got[0].bypassed[s.tag]) {
          REQUIRE(s.bytes % 4 == 0);  // raw floats
        } else {
          REQUIRE(s.header.magic == codec::WireHeader{}.magic);
          REQUIRE(int(s.header.codec) == codec_id);
        }
      }
    REQUIRE(got[0].lossy.aggregates[0][1] == got[0].fp32.aggregates[0][1]);  // the bias: exact fp32
    REQUIRE(got[0].lossy.aggregates[0][0] != got[0].fp32.aggregates[0][0]);  // the weights: compressed
    REQUIRE(got[0].lossy.stats.elements_compressed == 12'000);
    REQUIRE(got[0].lossy.stats.elements == 12'040);
  }
}

TEST_CASE("a collective run directly grows an empty workspace to each message", "[collective][lossy]") {
  // What a caller without the Synchronizer's warmed buffers (gradsync.torch.ddp_comm_hook) gets: the
  // encoded message must be read from the buffer after the encode grew it, not before.
  for (const std::string name : {"ring", "reduce-broadcast", "hierarchical:2", "hybrid"})
    for (const std::size_t n : {std::size_t{10}, std::size_t{5000}}) {
      const auto sums = testing::run_ranks<std::vector<float>>(3, [&](int r, transport::Transport& t) {
        std::vector<float> data(n, static_cast<float>(r + 1));  // exact in fp16: the mean is exactly 2
        collective::Workspace ws;
        collective::Job job{.data = data, .tag = 1};
        collective::AnyCollective::parse(name).run(t, codec::AnyCodec::parse("fp16:bypass=0"), job, ws);
        return data;
      });
      for (const auto& s : sums)
        for (float x : s) REQUIRE(x == 2.0f);
    }
}
