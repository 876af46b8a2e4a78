// 07: checkpoint and restore. A codec with error feedback (here 1-bit) keeps a residual per unit
// between iterations, stochastic codecs key their random numbers on the iteration, and DGT's
// collective learns each block's contribution: a resumed run continues bit-identically only if it
// restores the synchronizer's iteration and state, next to the model's own.
//
//   save:    sync.wait_all(); iteration = sync.iteration(); state = sync.state()
//   resume:  a new Synchronizer (same layout and policies), then sync.restore(iteration, state)
//            before its first gradient_ready
//
// The program trains 10 iterations straight through, then 6 + (checkpoint, new synchronizer,
// restore) + 4, on two in-process ranks, and checks the two runs end with identical parameters.
#include <gradsync/gradsync.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "example.hpp"

namespace gs = gradsync;
using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::OneBit,
                              gs::collective::Ring>;

const gs::ModelLayout layout{{"w", 6'000}, {"b", 500}};

/// Everything a rank saves: the model (its parameters) and the synchronizer's state.
struct Checkpoint {
  std::vector<std::vector<float>> params;
  std::int64_t iteration = 0;
  std::vector<float> sync_state;
};

/// `steps` SGD steps of rank `rank` on a quadratic whose minimum differs per rank, from `state`.
void train(Sync& sync, int rank, int steps, Checkpoint& state) {
  std::vector<std::vector<float>> grad(layout.num_layers());
  for (int s = 0; s < steps; ++s) {
    const auto it = sync.iteration();
    for (std::size_t l = layout.num_layers(); l-- > 0;) {
      auto& p = state.params[l];
      grad[l].resize(p.size());
      for (std::size_t i = 0; i < p.size(); ++i)
        grad[l][i] = p[i] - std::sin(float(i) + float(rank)) + 0.1f * std::cos(float(it * 7 + i));
      sync.gradient_ready(l, grad[l]);
    }
    sync.finish_iteration();
    for (std::size_t l = 0; l < layout.num_layers(); ++l) {
      sync.wait_for(l);
      for (std::size_t i = 0; i < grad[l].size(); ++i) state.params[l][i] -= 0.1f * grad[l][i];
    }
  }
  sync.wait_all();
  state.iteration = sync.iteration();
  state.sync_state = sync.state();
}

Checkpoint fresh() {
  Checkpoint c;
  for (const auto& l : layout.layers()) c.params.emplace_back(l.elements, 0.0f);
  return c;
}

int main() {
  return example::run([] {
    std::vector<Checkpoint> straight(2, fresh()), resumed(2, fresh());
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync sync{t, layout};
      train(sync, rank, 10, straight[rank]);
    });
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync sync{t, layout};
      train(sync, rank, 6, resumed[rank]);
    });
    // resumed[] is what each rank would write to disk; a new process reads it back:
    example::check(resumed[0].iteration == 6 && !resumed[0].sync_state.empty(), "1-bit keeps residuals");
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync sync{t, layout};
      sync.restore(resumed[rank].iteration, resumed[rank].sync_state);
      train(sync, rank, 4, resumed[rank]);
    });
    for (int r = 0; r < 2; ++r) {
      example::check(resumed[r].iteration == straight[r].iteration, "the iteration count continues");
      example::check(resumed[r].params == straight[r].params, "the resumed run is bit-identical to the straight one");
      example::check(resumed[r].sync_state == straight[r].sync_state, "and so is the synchronizer state (residuals)");
    }
    // Without restore() the residuals start from zero and the runs differ.
    std::vector<Checkpoint> forgot(2, fresh());
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync first{t, layout};
      train(first, rank, 6, forgot[rank]);
    });
    example::on_ranks(2, [&](int rank, gs::transport::Transport& t) {
      Sync sync{t, layout};
      train(sync, rank, 4, forgot[rank]);
    });
    example::check(forgot[0].params != straight[0].params, "skipping restore() changes the result");
    std::printf("resumed at iteration 6 with %zu residual values per rank: identical to the straight run\n",
                resumed[0].sync_state.size());
  });
}
