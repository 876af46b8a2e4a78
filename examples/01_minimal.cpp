// 01: the smallest complete program. Four ranks (threads of this process, one in-process
// transport each) hand over two layers' gradients; every rank gets back the mean.
//
//   sync.gradient_ready(layer, grad)   after backward made the layer's gradient (returns at once)
//   sync.wait_for(layer)               before the layer's optimizer step: `grad` now holds the mean
//   sync.finish_iteration()            after the whole backward pass
#include <gradsync/gradsync.hpp>

#include <cstdio>
#include <thread>
#include <vector>

namespace gs = gradsync;

int main() {
  constexpr int ranks = 4;
  const gs::ModelLayout layout{{"fc.weight", 1000}, {"fc.bias", 10}};  // forward order, elements
  gs::transport::InProcessGroup group(ranks);                          // or transport::Mpi, examples/02
  std::vector<int> failures(ranks, 0);

  auto rank_main = [&](int rank) {
    using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Identity,
                                  gs::collective::Ring>;
    Sync sync{group.rank(rank), layout};  // the papers' defaults; examples/03 sets knobs
    std::vector<float> weight_grad(1000, float(rank)), bias_grad(10, float(10 * rank));
    sync.gradient_ready(1, bias_grad);    // backward goes last layer first
    sync.gradient_ready(0, weight_grad);
    sync.finish_iteration();
    sync.wait_for(0);
    sync.wait_for(1);
    // The mean over ranks 0..3: (0+1+2+3)/4 = 1.5 and 15.
    for (float g : weight_grad) failures[rank] += g != 1.5f;
    for (float g : bias_grad) failures[rank] += g != 15.0f;
  };
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < ranks; ++r) threads.emplace_back(rank_main, r);
  }  // joins
  int bad = 0;
  for (int f : failures) bad += f;
  std::printf("%s: %d wrong elements\n", bad ? "FAILED" : "ok", bad);
  return bad == 0 ? 0 : 1;
}
