#include "gradsync/trainer/sync.hpp"
#include <gradsync/core/error.hpp>

#include <stdexcept>
#include <string>

namespace gradsync::trainer {

class LocalAllReduceGroup::Rank final : public GradientSync {
 public:
  Rank(LocalAllReduceGroup& g, std::size_t r) : g_(g), r_(r) {}
  void gradient_ready(std::size_t t, std::span<float> grad) override {
    if (t >= g_.sizes_.size() || grad.size() != g_.sizes_[t])
      throw UsageError("all-reduce: tensor " + std::to_string(t) + " with " + std::to_string(grad.size()) +
                                  " elements does not match the layout");
    g_.grads_[r_][t] = grad;
  }
  void wait_for(std::size_t) override {}  // finish_iteration already reduced everything
  void finish_iteration() override {
    g_.arrive_and_wait();  // all spans published
    g_.reduce(r_);
    g_.arrive_and_wait();  // all tensors reduced before anyone reuses a buffer
  }

 private:
  LocalAllReduceGroup& g_;
  std::size_t r_;
};

LocalAllReduceGroup::LocalAllReduceGroup(std::size_t ranks, std::vector<std::size_t> tensor_sizes)
    : ranks_(ranks), sizes_(std::move(tensor_sizes)), grads_(ranks, std::vector<std::span<float>>(sizes_.size())) {
  if (ranks == 0) throw UsageError("all-reduce: need at least one rank");
}

std::unique_ptr<GradientSync> LocalAllReduceGroup::rank(std::size_t r) {
  if (r >= ranks_) throw std::out_of_range("all-reduce: rank " + std::to_string(r) + " of " + std::to_string(ranks_));
  return std::make_unique<Rank>(*this, r);
}

void LocalAllReduceGroup::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void LocalAllReduceGroup::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (aborted_) throw std::runtime_error("all-reduce: another rank failed");
  const std::size_t gen = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (aborted_) throw std::runtime_error("all-reduce: another rank failed");
}

// Rank r reduces tensors r, r + N, ...: the sum in rank order, times 1/N, written to every rank.
void LocalAllReduceGroup::reduce(std::size_t r) {
  const float inv = 1.0f / float(ranks_);
  for (std::size_t t = r; t < sizes_.size(); t += ranks_) {
    for (std::size_t k = 0; k < ranks_; ++k)
      if (grads_[k][t].size() != sizes_[t])
        throw std::logic_error("all-reduce: rank " + std::to_string(k) + " gave no gradient for tensor " +
                               std::to_string(t));
    auto& first = grads_[0][t];
    for (std::size_t i = 0; i < sizes_[t]; ++i) {
      float s = first[i];
      for (std::size_t k = 1; k < ranks_; ++k) s += grads_[k][t][i];
      s *= inv;
      for (std::size_t k = 0; k < ranks_; ++k) grads_[k][t][i] = s;
    }
  }
}

}  // namespace gradsync::trainer
