// 02: a complete training loop, one rank per MPI process (ctest runs it under
// `mpiexec -np 2`; build with the gradsync::mpi target).
//
// A tiny MLP (in -> tanh hidden -> out) fits a fixed random teacher network by SGD. Every rank
// starts from the same weights and draws its own data. The hooks are the ones to copy into your
// own trainer:
//   backward:  as soon as a layer's gradient exists -> sync.gradient_ready(layer, grad)
//   forward:   before a layer computes -> sync.wait_for(layer), then that layer's SGD step
// so aggregation overlaps the rest of backward and the next forward pass.
// MpiSession initializes MPI with the thread support gradsync needs and turns an exception on
// one rank into a message and a non-zero exit instead of a hang.

// GCC 12's AVX-512 headers warn about _mm512_undefined_*() inside Eigen (GCC bug 105593, fixed in
// GCC 13): silence that for Eigen's code only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>
#pragma GCC diagnostic pop

#include <array>
#include <cstdio>
#include <random>
#include <stdexcept>

#include <gradsync/gradsync.hpp>
#include <gradsync/transport/mpi_session.hpp>

namespace gs = gradsync;
using Matrix = Eigen::MatrixXf;

constexpr int kIn = 32, kHidden = 64, kOut = 8, kBatch = 64, kSteps = 300;
constexpr float kLr = 0.05f;

/// A matrix of uniform values in [-scale, scale) from `rng` (each rank its own generator: Eigen's
/// Random() shares std::rand's one global state between threads).
Matrix uniform(std::mt19937& rng, int rows, int cols, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  return Matrix::NullaryExpr(rows, cols, [&] { return u(rng); });
}

struct Mlp {
  // Parameters in forward order: layer ids 0..3 for gradsync (the ModelLayout below).
  Matrix w1, b1, w2, b2;
  std::array<Matrix, 4> grad;
  explicit Mlp(std::mt19937& rng)
      : w1(uniform(rng, kHidden, kIn, 0.3f)), b1(Matrix::Zero(kHidden, 1)), w2(uniform(rng, kOut, kHidden, 0.3f)),
        b2(Matrix::Zero(kOut, 1)) {
    for (int l = 0; l < 4; ++l) grad[l] = Matrix::Zero(param(l).rows(), param(l).cols());
  }
  Matrix& param(int layer) {
    std::array<Matrix*, 4> p{&w1, &b1, &w2, &b2};
    return *p.at(layer);
  }
};

int main(int argc, char** argv) {
  gs::transport::MpiSession mpi(argc, argv);
  return mpi.run([&] {
    gs::transport::Mpi transport{MPI_COMM_WORLD};
    const int rank = transport.rank();
    const gs::ModelLayout layout{{"fc1.weight", kHidden * kIn}, {"fc1.bias", kHidden},
                                 {"fc2.weight", kOut * kHidden}, {"fc2.bias", kOut}};
    gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Identity, gs::collective::Ring>
        sync{transport, layout, {}, {.slicing = {.max_elements = 512}}};

    std::mt19937 shared(7);                 // the same seed on every rank: same start, same teacher
    Mlp m(shared);
    const Matrix teacher = uniform(shared, kOut, kIn);
    std::mt19937 data(100 + rank);          // each rank its own data

    auto step = [&](int layer) {            // wait for the aggregate, then SGD on that layer
      sync.wait_for(layer);
      m.param(layer) -= kLr * m.grad[layer];
    };
    auto hand_over = [&](int layer) {
      sync.gradient_ready(layer, std::span(m.grad[layer].data(), m.grad[layer].size()));
    };
    float first_loss = 0, loss = 0;
    for (int it = 0; it < kSteps; ++it) {
      const Matrix x = uniform(data, kIn, kBatch);
      const Matrix y = teacher * x;
      // forward, layer by layer: each layer's update happens just before it is used
      step(0), step(1);
      const Matrix h = ((m.w1 * x).colwise() + m.b1.col(0)).array().tanh().matrix();
      step(2), step(3);
      const Matrix out = (m.w2 * h).colwise() + m.b2.col(0);
      const Matrix err = out - y;
      loss = err.squaredNorm() / kBatch;
      if (it == 0) first_loss = loss;
      // backward, last layer first: hand each gradient over as soon as it exists
      const Matrix dout = 2.0f * err / kBatch;
      m.grad[3] = dout.rowwise().sum(), hand_over(3);
      m.grad[2] = dout * h.transpose(), hand_over(2);
      const Matrix dh = (m.w2.transpose() * dout).array() * (1.0f - h.array().square());
      m.grad[1] = dh.rowwise().sum(), hand_over(1);
      m.grad[0] = dh * x.transpose(), hand_over(0);
      sync.finish_iteration();
      if (rank == 0 && it % 50 == 0) std::printf("step %3d  loss %.5f\n", it, loss);
    }
    for (int l = 0; l < 4; ++l) step(l);  // apply the last aggregate

    // Every rank applied the same aggregates to the same start: the replicas must be identical.
    std::array<float, 2> mine{m.w1.sum(), m.w2.sum()}, lowest{}, highest{};
    MPI_Allreduce(mine.data(), lowest.data(), 2, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine.data(), highest.data(), 2, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    if (lowest != highest) throw std::runtime_error("the replicas diverged");
    if (!(loss < 0.02f * first_loss))
      throw std::runtime_error("training did not converge: loss " + std::to_string(first_loss) + " -> " +
                               std::to_string(loss));
    const auto s = sync.stats();
    std::printf("rank %d: loss %.5f -> %.5f; %llu units, %.2f MB sent, %.1f ms waiting exposed\n", rank, first_loss,
                loss, static_cast<unsigned long long>(s.units), s.bytes_sent / 1e6, s.exposed_wait_seconds * 1e3);
  });
}
