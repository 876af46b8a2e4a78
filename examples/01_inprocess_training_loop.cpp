// 01: a complete custom training loop on 4 in-process ranks, hooked into gradsync.
//
// A tiny MLP (in -> tanh hidden -> out) fits a fixed random teacher network by SGD. Each rank
// holds a replica and its own data shard. The hooks are the ones to copy into your own trainer:
//   backward:  as soon as a layer's gradient exists -> sync.gradient_ready(layer, grad)
//   forward:   before a layer computes -> sync.wait_for(layer), then that layer's SGD step
// so aggregation overlaps the rest of backward and the next forward pass.
#include <Eigen/Dense>
#include <cstdio>
#include <thread>
#include <vector>

#include <gradsync/gradsync.hpp>

namespace gs = gradsync;
using Matrix = Eigen::MatrixXf;

constexpr int kIn = 32, kHidden = 64, kOut = 8, kBatch = 64, kRanks = 4, kSteps = 300;
constexpr float kLr = 0.05f;

struct Mlp {
  // Parameters in forward order: layer ids 0..3 for gradsync.
  Matrix w1 = Matrix::Random(kHidden, kIn) * 0.3f, b1 = Matrix::Zero(kHidden, 1);
  Matrix w2 = Matrix::Random(kOut, kHidden) * 0.3f, b2 = Matrix::Zero(kOut, 1);
  Matrix g[4];  // gradients, same shapes
  Matrix* params() { return &w1; }
};

int main() {
  gs::ModelLayout layout{{"fc1.weight", kHidden * kIn}, {"fc1.bias", kHidden},
                         {"fc2.weight", kOut * kHidden}, {"fc2.bias", kOut}};
  gs::transport::InProcessGroup group(kRanks);

  std::srand(7);
  const Mlp init;                                        // every replica starts identical
  const Matrix teacher = Matrix::Random(kOut, kIn);      // the function to learn
  std::vector<float> first_loss(kRanks), final_loss(kRanks);

  auto rank_main = [&](int rank) {
    gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Identity, gs::collective::Ring>
        sync{group.rank(rank), layout, {}, {.slicing = {.max_elements = 512}}};
    Mlp m = init;
    for (int i = 0; i < 4; ++i) m.g[i] = Matrix::Zero(m.params()[i].rows(), m.params()[i].cols());
    auto step = [&](int layer) {          // wait for the aggregate, then SGD on that layer
      sync.wait_for(layer);
      m.params()[layer] -= kLr * m.g[layer];
    };
    auto hand_over = [&](int layer) {
      sync.gradient_ready(layer, std::span(m.g[layer].data(), m.g[layer].size()));
    };

    std::srand(100 + rank);               // each rank its own data shard
    for (int it = 0; it < kSteps; ++it) {
      const Matrix x = Matrix::Random(kIn, kBatch);
      const Matrix y = teacher * x;
      // forward, layer by layer: each layer's update happens just before it is used
      step(0), step(1);
      const Matrix h = ((m.w1 * x).colwise() + m.b1.col(0)).array().tanh().matrix();
      step(2), step(3);
      const Matrix out = (m.w2 * h).colwise() + m.b2.col(0);
      const Matrix err = out - y;
      const float loss = err.squaredNorm() / kBatch;
      // backward, last layer first: hand each gradient over as soon as it exists
      const Matrix dout = 2.0f * err / kBatch;
      m.g[3] = dout.rowwise().sum(), hand_over(3);
      m.g[2] = dout * h.transpose(), hand_over(2);
      const Matrix dh = (m.w2.transpose() * dout).array() * (1.0f - h.array().square());
      m.g[1] = dh.rowwise().sum(), hand_over(1);
      m.g[0] = dh * x.transpose(), hand_over(0);
      sync.finish_iteration();
      if (rank == 0 && it % 50 == 0) std::printf("step %3d  loss %.5f\n", it, loss);
      (it == 0 ? first_loss : final_loss)[rank] = loss;
    }
    for (int l = 0; l < 4; ++l) step(l);  // apply the last aggregate
    if (rank == 0) {
      const auto s = sync.stats();
      std::printf("rank 0: %llu units, %.2f MB sent, %.1f ms waiting exposed\n",
                  static_cast<unsigned long long>(s.units), s.bytes_sent / 1e6, s.exposed_wait_seconds * 1e3);
    }
  };

  std::vector<std::jthread> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.emplace_back(rank_main, r);
  ranks.clear();
  std::printf("loss on rank 0: %.5f -> %.5f\n", first_loss[0], final_loss[0]);
  return final_loss[0] < 0.02f * first_loss[0] ? 0 : 1;  // fails if training did not work
}
