// gradsync::torch::DistributedOptimizer on LibTorch models, ranks as threads of one process:
// against the all-reduce mean DDP computes (each rank's gradient summed in rank order, divided by
// the number of ranks, then the same optimizer step), the forward order as the layout, the
// training patterns and the errors.
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <catch2/catch.hpp>

#include <array>
#include <functional>
#include <numeric>
#include <gradsync/torch/distributed_optimizer.hpp>

#include "support/ranks.hpp"

namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;
using Optimizer = gradsync::torch::DistributedOptimizer<>;

/// Two conv + batch-norm blocks and a classifier for 1x12x12 inputs. Its forward calls `before`
/// for each module (the DistributedOptimizer's before_forward, or nothing).
struct Net : nn::Module {
  explicit Net(int classes = 10, bool classifier_first = false) {
    if (classifier_first) fc = register_module("fc", nn::Linear(144, classes));  // registered first, runs last
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(8));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(16));
    if (!classifier_first) fc = register_module("fc", nn::Linear(144, classes));
    unused = register_module("unused", nn::Linear(4, 4));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = F::max_pool2d(F::relu(run(bn1, run(conv1, x))), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(F::relu(run(bn2, run(conv2, x))), F::MaxPool2dFuncOptions(2));
    return run(fc, x.flatten(1));
  }
  template <class M>
  torch::Tensor run(M& m, const torch::Tensor& x) {
    if (before) before(*m);
    return m(x);
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Linear fc{nullptr}, unused{nullptr};
  std::function<void(const nn::Module&)> before;
};

struct Batch {
  torch::Tensor x, y;
};
/// Rank r's batches, made on the main thread (LibTorch's generator is global).
std::vector<std::vector<Batch>> make_data(int ranks, int steps) {
  torch::manual_seed(1);
  std::vector<std::vector<Batch>> data(ranks);
  for (int s = 0; s < steps; ++s)
    for (auto& d : data) d.push_back({torch::randn({8, 1, 12, 12}), torch::randint(0, 10, {8})});
  return data;
}
std::shared_ptr<Net> make_net(bool classifier_first = false) {
  torch::manual_seed(0);
  return std::make_shared<Net>(10, classifier_first);
}

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;
const MakeOptimizer sgd = [](std::vector<torch::Tensor> p) {
  return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
};
const MakeOptimizer adam = [](std::vector<torch::Tensor> p) {
  return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-3));
};

std::vector<torch::Tensor> weights(Net& net) {
  std::vector<torch::Tensor> w;
  for (const auto& p : net.parameters()) w.push_back(p.detach().clone());
  return w;
}

/// DDP's result: every replica's gradients, their mean in rank order, the same step everywhere.
std::vector<torch::Tensor> reference(const std::vector<std::vector<Batch>>& data, const MakeOptimizer& make,
                                     bool classifier_first = false) {
  const int ranks = static_cast<int>(data.size());
  std::vector<std::shared_ptr<Net>> nets;
  std::vector<std::unique_ptr<torch::optim::Optimizer>> opts;
  for (int r = 0; r < ranks; ++r) {
    nets.push_back(make_net(classifier_first));
    opts.push_back(make(nets.back()->parameters()));
  }
  for (std::size_t s = 0; s < data[0].size(); ++s) {
    for (int r = 0; r < ranks; ++r) torch::nll_loss(torch::log_softmax(nets[r]->forward(data[r][s].x), 1), data[r][s].y).backward();
    const auto params = nets[0]->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!params[i].grad().defined()) continue;  // no rank had a gradient (DDP leaves none)
      torch::Tensor sum = params[i].grad().clone();
      for (int r = 1; r < ranks; ++r) sum += nets[r]->parameters()[i].grad();
      const torch::Tensor mean = sum / ranks;
      for (int r = 0; r < ranks; ++r) nets[r]->parameters()[i].mutable_grad() = mean.clone();
    }
    for (int r = 0; r < ranks; ++r) {
      opts[r]->step();
      opts[r]->zero_grad();
    }
  }
  return weights(*nets[0]);
}

struct Run {
  std::vector<torch::Tensor> weights;
  std::vector<std::string> layout;
  std::string policies;  ///< the Synchronizer's describe()
};

/// Each rank trains its own replica under gradsync; `hooks`: the forward calls before_forward.
std::vector<Run> train(const std::vector<std::vector<Batch>>& data, const MakeOptimizer& make, bool hooks = true,
                       bool classifier_first = false, Optimizer::Config config = {}) {
  const int ranks = static_cast<int>(data.size());
  std::vector<std::shared_ptr<Net>> nets;
  for (int r = 0; r < ranks; ++r) nets.push_back(make_net(classifier_first));
  return testing::run_ranks<Run>(ranks, [&](int r, gradsync::transport::Transport& t) {
    Net& net = *nets[r];
    auto inner = make(net.parameters());
    Optimizer opt(t, net, *inner, config);
    if (hooks) net.before = [&](const nn::Module& m) { opt.before_forward(m); };
    for (const Batch& b : data[r]) {
      torch::nll_loss(torch::log_softmax(net.forward(b.x), 1), b.y).backward();
      opt.step();
      opt.zero_grad();
    }
    opt.synchronize();
    std::vector<std::string> layout;
    for (const auto& l : opt.attachment().synchronizer()->layout().layers()) layout.push_back(l.name);
    return Run{weights(net), layout, opt.attachment().synchronizer()->describe()};
  });
}

bool identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

struct OneThread {
  OneThread() { torch::set_num_threads(1); }  // ranks are threads; one each keeps the arithmetic alike
} one_thread;

}  // namespace

TEST_CASE("torch: 2 ranks train a conv net with batch norm bit-identically to DDP's mean", "[torch]") {
  const auto data = make_data(2, 5);
  for (const auto* make : {&sgd, &adam}) {
    const auto expected = reference(data, *make);
    for (bool hooks : {true, false}) {
      INFO("optimizer " << (make == &sgd ? "sgd" : "adam") << (hooks ? ", steps before each forward" : ", steps in step()"));
      const auto runs = train(data, *make, hooks);
      CHECK(identical(runs[0].weights, expected));
      CHECK(identical(runs[1].weights, runs[0].weights));
    }
  }
}

TEST_CASE("torch: 3 ranks agree with DDP within fp32 rounding and exactly with each other", "[torch]") {
  const auto data = make_data(3, 5);
  const auto expected = reference(data, sgd);
  const auto runs = train(data, sgd);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(runs[0].weights[i], expected[i], 1e-5, 1e-6));
    CHECK(torch::equal(runs[1].weights[i], runs[0].weights[i]));
    CHECK(torch::equal(runs[2].weights[i], runs[0].weights[i]));
  }
}

TEST_CASE("torch: the layout is the forward order of the first iteration, not the registration order", "[torch]") {
  const auto data = make_data(2, 2);
  const auto runs = train(data, sgd, true, /*classifier_first=*/true);
  const std::vector<std::string> forward_order{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                                               "bn2.bias", "fc.weight", "fc.bias",
                                               // trained, but no module of theirs runs: last
                                               "unused.weight", "unused.bias"};
  CHECK(runs[0].layout == forward_order);
  CHECK(identical(runs[0].weights, reference(data, sgd, true)));
}

TEST_CASE("torch: Config::choose gets the first iteration's modules in forward order and picks the policies", "[torch]") {
  const auto data = make_data(2, 3);
  std::array<gradsync::torch::FirstIteration, 2> seen;
  std::array<std::vector<std::string>, 2> layouts;
  Optimizer::Config config;
  config.choose = [&](gradsync::transport::Transport& t, const gradsync::torch::FirstIteration& first,
                      const gradsync::ModelLayout& layout, gradsync::AnySynchronizer::Policies& policies,
                      gradsync::Options&) {
    seen.at(t.rank()) = first;
    for (const auto& l : layout.layers()) layouts.at(t.rank()).push_back(l.name);
    policies = gradsync::AnySynchronizer::parse({"fixed:100", "forward", "fp32", "ring"});
  };
  const auto runs = train(data, sgd, true, /*classifier_first=*/true, config);
  CHECK_THAT(runs[0].policies, Catch::StartsWith("fixed:100/forward/fp32/ring"));
  CHECK(identical(runs[0].weights, reference(data, sgd, true)));  // a 2-rank mean is exact: DDP's bits
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const auto& layers = seen[r].layers;
    std::vector<std::string> with_tensors;
    std::vector<std::size_t> tensors;
    double total = 0;
    for (const auto& l : layers) {
      CHECK(l.forward_seconds >= 0);
      CHECK(l.backward_seconds >= 0);
      total += l.forward_seconds + l.backward_seconds;
      if (!l.tensors.empty()) with_tensors.push_back(l.name);
      tensors.insert(tensors.end(), l.tensors.begin(), l.tensors.end());
    }
    // forward order (the classifier registered first runs last); `unused` never ran: last, untimed
    CHECK(with_tensors ==
          std::vector<std::string>{"conv1", "bn1", "conv2", "bn2", "fc", "(modules whose forward did not run)"});
    CHECK(layers.back().forward_seconds == 0);
    CHECK(layers.back().backward_seconds == 0);
    CHECK(total > 0);
    // every tensor of the layout once, in layout order
    std::vector<std::size_t> all(layouts[r].size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    CHECK(tensors == all);
    CHECK(runs[r].layout == layouts[r]);
  }
}

namespace {
/// Runs `body` on 2 ranks; each rank's error message, or "" when it threw none.
std::vector<std::string> errors(const std::function<void(int, gradsync::transport::Transport&)>& body) {
  return testing::run_ranks<std::string>(2, [&](int r, gradsync::transport::Transport& t) -> std::string {
    try {
      body(r, t);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
}
}  // namespace

TEST_CASE("torch: bad input gets an error naming the parameter", "[torch]") {
  using Catch::Matchers::Contains;
  SECTION("a model that differs between ranks") {
    std::vector<std::shared_ptr<Net>> nets{std::make_shared<Net>(10), std::make_shared<Net>(11)};
    for (const auto& e : errors([&](int r, gradsync::transport::Transport& t) {
           auto inner = sgd(nets[r]->parameters());
           Optimizer opt(t, *nets[r], *inner);
         }))
      CHECK_THAT(e, Contains("rank 1 has parameter 'fc.weight' [11, 144]") && Contains("where rank 0 has parameter "
                                                                                      "'fc.weight' [10, 144]"));
  }
  SECTION("float64 parameters") {
    auto net = make_net();
    net->to(torch::kFloat64);
    gradsync::transport::InProcessGroup one(1);
    auto inner = sgd(net->parameters());
    CHECK_THROWS_WITH(Optimizer(one.rank(0), *net, *inner), Contains("parameter 'conv1.weight' is Double") &&
                                                                Contains(".float()"));
  }
  SECTION("LBFGS, and tensors that are not the model's") {
    auto net = make_net();
    gradsync::transport::InProcessGroup one(1);
    torch::optim::LBFGS lbfgs(net->parameters());
    CHECK_THROWS_WITH(Optimizer(one.rank(0), *net, lbfgs), Contains("LBFGS"));
    auto params = net->parameters();
    params.push_back(torch::zeros({3}, torch::requires_grad()));
    auto inner = sgd(params);
    CHECK_THROWS_WITH(Optimizer(one.rank(0), *net, *inner), Contains("not a parameter of the model"));
  }
  SECTION("a sparse gradient") {
    struct Sparse : nn::Module {
      nn::Embedding emb = register_module("emb", nn::Embedding(nn::EmbeddingOptions(10, 4).sparse(true)));
    };
    auto net = std::make_shared<Sparse>();
    gradsync::transport::InProcessGroup one(1);
    auto inner = sgd(net->parameters());
    Optimizer opt(one.rank(0), *net, *inner);
    CHECK_THROWS_WITH(net->emb(torch::tensor({1, 2})).sum().backward(),
                      Contains("parameter 'emb.weight' got a sparse gradient"));
  }
}
