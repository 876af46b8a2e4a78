// 04: policies chosen at run time, from the command line, with AnySynchronizer.
//
//   04_runtime_policies [slicing [priority [codec [collective]]]]
//   04_runtime_policies fusion:1MiB fifo qsgd8 ps
//
// Parse the names once, in main, before any rank starts: a bad name fails here with a ConfigError
// that lists the valid ones (and a codec the collective cannot carry, with check_accepts), instead
// of inside every rank's thread. Each rank then builds its synchronizer from the parsed policies.
// The program checks every rank got the mean: exactly for a lossless codec, within the codec's
// error otherwise.
#include <gradsync/gradsync.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;

int main(int argc, char** argv) {
  return example::run([&] {
    gs::PolicyNames names;  // defaults: fixed:40000 forward fp32 ring
    std::string* fields[] = {&names.slicing, &names.priority, &names.codec, &names.collective};
    for (int i = 1; i < argc && i <= 4; ++i) *fields[i - 1] = argv[i];
    const auto policies = gs::AnySynchronizer::parse(names);  // throws ConfigError on a bad name
    gs::collective::check_accepts(policies.collective, policies.codec);

    constexpr int ranks = 3;
    const gs::ModelLayout layout{{"embedding", 50'000}, {"lstm", 20'000}, {"decoder.bias", 100}};
    std::vector<double> error(ranks);
    std::string described;
    example::on_ranks(ranks, [&](int rank, gs::transport::Transport& t) {
      gs::AnySynchronizer sync{t, layout, {}, policies};
      if (rank == 0) described = sync.describe();
      std::vector<std::vector<float>> grad(layout.num_layers());
      for (std::size_t l = layout.num_layers(); l-- > 0;) {
        grad[l].resize(layout.layer(l).elements);
        for (std::size_t i = 0; i < grad[l].size(); ++i) grad[l][i] = std::cos(float(i) * 0.01f) * float(rank + 1);
        sync.gradient_ready(l, grad[l]);
      }
      sync.finish_iteration();
      sync.wait_all();
      double diff = 0, norm = 0;  // the mean is cos(0.01 i) * (1+2+3)/3 = 2 cos(0.01 i)
      for (auto& g : grad)
        for (std::size_t i = 0; i < g.size(); ++i) {
          const double mean = 2.0 * std::cos(float(i) * 0.01f);
          diff += (g[i] - mean) * (g[i] - mean);
          norm += mean * mean;
        }
      error[rank] = std::sqrt(diff / norm);
    });
    const bool lossless = policies.codec.traits().lossless;
    std::printf("%s: relative error of the mean %.2e on rank 0\n", described.c_str(), error[0]);
    for (double e : error)
      example::check(lossless ? e < 1e-6 : e < 0.5, "every rank got the mean (within the codec's error)");
  });
}
