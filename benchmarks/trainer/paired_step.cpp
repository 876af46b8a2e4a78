#include "paired_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/optimizer.hpp"

namespace gradsync::trainer::bench {

namespace {

void write_tensors(const std::string& path, const std::vector<const Tensor*>& tensors) {
  std::ofstream f(path, std::ios::binary);
  for (const Tensor* t : tensors) {
    const std::vector<float> v = t->to_host();
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  }
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// The model's trained state, written as PREFIX_weights.f32, PREFIX_velocity.f32, PREFIX_buffers.f32.
void write_state(const std::string& prefix, Model& model, Optimizer& opt) {
  std::vector<const Tensor*> weights, velocity, buffers;
  for (const Param* p : model.params()) {
    weights.push_back(&p->value);
    velocity.push_back(&opt.state().at(p->index));
  }
  for (const Tensor* b : model.buffers()) buffers.push_back(b);
  write_tensors(prefix + "_weights.f32", weights);
  write_tensors(prefix + "_velocity.f32", velocity);
  write_tensors(prefix + "_buffers.f32", buffers);
}

/// train()'s weights after k iterations of the same run.
std::vector<std::vector<float>> trained_weights(TrainConfig c, std::size_t k) {
  c.stop_after = k;
  c.evaluate = false;
  c.progress = false;
  return train(c).weights;
}

/// The largest |weight - reference| over the model's tensors (reference in forward order).
double largest_difference(const Model& model, const std::vector<std::vector<float>>& reference) {
  double worst = 0;
  for (const Param* p : model.params()) {
    const std::vector<float> mine = p->value.to_host();
    for (std::size_t i = 0; i < mine.size(); ++i)
      worst = std::max(worst, double(std::abs(mine[i] - reference.at(p->index).at(i))));
  }
  return worst;
}

}  // namespace

PairedStep run_paired_step(const TrainConfig& c, std::size_t k, const std::string& dir) {
  if (k == 0) throw std::invalid_argument("--paired-step needs at least one iteration");
  backend::set_threads(c.threads);
  const Dataset data = load_fashion_mnist(true, c.data_dir);
  auto model = make_model(c.model);
  model->initialize(c.seed);
  Optimizer opt(model->params(), c.optimizer);
  ShardedLoader loader(data, c.batch, 0, 1, c.seed);
  const std::size_t bpe = loader.batches_per_epoch(), total = c.iterations ? c.iterations : c.epochs * bpe;
  if (k > std::min(total, bpe)) throw std::invalid_argument("--paired-step: K is past the run's first epoch");
  const LrSchedule schedule(c.lr, c.lr_schedule, std::size_t(std::lround(c.warmup_epochs * double(bpe))), total);
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<std::int32_t> y;
  std::ofstream losses(dir + "/losses.txt");
  losses.precision(9);
  for (std::size_t it = 0; it < k; ++it) {
    const bool last = it + 1 == k;
    if (last) write_state(dir + "/pre", *model, opt);
    loader.batch(0, it, x, y);
    Context ctx{.training = true, .seed = c.seed, .step = it};
    const Tensor logits = model->forward(x, ctx);
    losses << loss.forward(logits, y) << "\n";
    model->backward(loss.backward().reshaped(logits.shape()), ctx);
    if (last) {
      std::vector<const Tensor*> grads;
      for (const Param* p : model->params()) grads.push_back(&p->grad);
      write_tensors(dir + "/grads.f32", grads);
    }
    for (Param* p : model->params()) opt.step(*p, schedule(it));
  }
  write_state(dir + "/post", *model, opt);
  return {.direct_vs_train = largest_difference(*model, trained_weights(c, k)),
          .test = evaluate(*model, load_fashion_mnist(false, c.data_dir))};
}

}  // namespace gradsync::trainer::bench
