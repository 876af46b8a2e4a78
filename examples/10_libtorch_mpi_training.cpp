// 10: a LibTorch model trained data-parallel with gradsync, one rank per MPI process (ctest runs
// it under `mpiexec -np 2`; build with the gradsync::torch and gradsync::mpi targets).
//
// A conv net with batch norm (torch::nn) learns to classify 1x16x16 images by a fixed random
// teacher's labels; each rank draws its own images. What to copy into your own LibTorch code:
//   - gradsync::torch::DistributedOptimizer wraps your model and optimizer: rank 0's weights go to
//     every rank, and each parameter's gradient goes out the moment autograd has accumulated it;
//   - your forward calls opt.before_forward(module) for each module (here through Net::run):
//     it waits for that module's aggregated gradients only and steps the optimizer for them, so
//     the last layers' communication overlaps the first layers' next forward pass (P3);
//   - opt.step() returns at once; opt.synchronize() applies every step (before evaluating).
// The policies come from argv by gradsync-train's names (default: P3's fixed:40000 forward fp32
// ring). The program checks that the loss falls and that every rank holds the same weights.
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <functional>

#include <gradsync/torch/distributed_optimizer.hpp>
#include <gradsync/torch/exchange.hpp>
#include <gradsync/transport/mpi.hpp>

#include "example.hpp"

namespace gs = gradsync;
namespace nn = torch::nn;
namespace F = torch::nn::functional;

constexpr int kBatch = 32, kSteps = 60, kClasses = 10;

struct Net : nn::Module {
  nn::Conv2d conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)));
  nn::BatchNorm2d bn1 = register_module("bn1", nn::BatchNorm2d(16));
  nn::Conv2d conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1).bias(false)));
  nn::BatchNorm2d bn2 = register_module("bn2", nn::BatchNorm2d(32));
  nn::Linear fc = register_module("fc", nn::Linear(32 * 4 * 4, kClasses));
  /// Called before each module computes: the DistributedOptimizer's before_forward.
  std::function<void(const nn::Module&)> before = [](const nn::Module&) {};

  torch::Tensor forward(torch::Tensor x) {
    x = F::max_pool2d(F::relu(run(bn1, run(conv1, x))), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(F::relu(run(bn2, run(conv2, x))), F::MaxPool2dFuncOptions(2));
    return run(fc, x.flatten(1));
  }
  template <class M>
  torch::Tensor run(M& module, const torch::Tensor& x) {
    before(*module);
    return module(x);
  }
};

int main(int argc, char** argv) {
  gs::transport::MpiSession mpi(argc, argv);
  return mpi.run([&] {
    torch::set_num_threads(1);
    gs::transport::Mpi transport;
    const int rank = transport.rank();
    torch::manual_seed(1000 + rank);  // each rank's own weights: the optimizer starts them all at rank 0's
    auto net = std::make_shared<Net>();
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const gs::PolicyNames names{argc > 1 ? argv[1] : "fixed:40000", argc > 2 ? argv[2] : "forward",
                                argc > 3 ? argv[3] : "fp32", argc > 4 ? argv[4] : "ring"};
    gs::torch::DistributedOptimizer<> opt(transport, *net, sgd, {.policies = gs::AnySynchronizer::parse(names)});
    net->before = [&](const nn::Module& m) { opt.before_forward(m); };

    torch::manual_seed(7);  // the teacher is the same on every rank; the images are each rank's own
    const torch::Tensor teacher = torch::randn({16 * 16, kClasses});
    torch::manual_seed(rank);
    float first = 0, last = 0;
    for (int step = 0; step < kSteps; ++step) {
      const torch::Tensor x = torch::randn({kBatch, 1, 16, 16});
      const torch::Tensor y = x.flatten(1).matmul(teacher).argmax(1);
      const torch::Tensor loss = F::cross_entropy(net->forward(x), y);
      loss.backward();
      opt.step();
      opt.zero_grad();
      if (step < 10) first += loss.item<float>() / 10;  // the mean of the first ten, and of the last ten
      if (step >= kSteps - 10) last += loss.item<float>() / 10;
    }
    opt.synchronize();
    const auto s = opt.stats();
    if (rank == 0)
      std::printf("10_libtorch_mpi_training: %d ranks, %s: loss %.3f -> %.3f; rank 0 sent %.2f MB, waited %.3f s\n",
                  transport.size(), opt.attachment().synchronizer()->describe().c_str(), first, last,
                  double(s.bytes_sent) / 1e6, s.exposed_wait_seconds);
    example::check(last < 0.8f * first, "the loss falls");
    for (const auto& p : net->parameters()) {  // rank 0's weights, bit for bit, on every rank
      torch::Tensor theirs = p.detach().clone();
      gs::torch::broadcast_into(transport, std::span(static_cast<std::byte*>(theirs.data_ptr()), theirs.nbytes()));
      example::check(torch::equal(theirs, p), "every rank holds rank 0's weights");
    }
  });
}
