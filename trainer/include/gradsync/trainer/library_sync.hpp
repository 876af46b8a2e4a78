#pragma once
// The adapter from the trainer's GradientSync hook to the library's Synchronizer: the whole of
// what a trainer needs to use gradsync.
//   SynchronizerHook<Sync>  any Synchronizer<Slicing, Priority, Codec, Collective>, policies fixed
//                           at compile time (examples/09_trainer_compile_time.cpp)
//   LibrarySync             AnySynchronizer: policies chosen by name at run time (gradsync-train)
#include <gradsync/any_synchronizer.hpp>

#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/sync.hpp"

namespace gradsync::trainer {

/// The layout gradsync needs for `model`: its tensors in forward order.
inline ModelLayout layout_of(const Model& model) {
  std::vector<LayerSpec> specs;
  for (auto& [name, elements] : model.layout()) specs.push_back({name, elements});
  return ModelLayout{std::move(specs)};
}

template <class Sync>
class SynchronizerHook : public GradientSync {
 public:
  /// `report`, when given, receives this rank's statistics when the adapter is destroyed.
  SynchronizerHook(transport::Transport& transport, const Model& model, Options options,
                   typename Sync::Policies policies = {}, Statistics* report = nullptr)
      : sync_(transport, layout_of(model), std::move(options), std::move(policies)), report_(report) {}
  ~SynchronizerHook() override {
    if (report_) *report_ = sync_.stats();
  }

  void gradient_ready(std::size_t tensor, std::span<float> grad) override { sync_.gradient_ready(tensor, grad); }
  void wait_for(std::size_t tensor) override { sync_.wait_for(tensor); }  // Options::average: the mean
  void finish_iteration() override { sync_.finish_iteration(); }
  std::size_t state_size() const override { return sync_.state_size(); }
  std::vector<float> state() const override { return sync_.state(); }
  void load_state(std::size_t iteration, std::span<const float> saved) override {
    sync_.restore(std::int64_t(iteration), saved);
  }
  std::string describe() const override { return sync_.describe(); }
  void abort(const std::string& reason) override { sync_.abort(reason); }
  void report_loss(float loss) override { sync_.report_loss(loss); }
  Statistics statistics() const override { return sync_.stats(); }
  bool takes_device_memory(std::size_t tensor) const override { return sync_.device_refusal(tensor).empty(); }

 private:
  Sync sync_;
  Statistics* report_;
};

class LibrarySync final : public SynchronizerHook<AnySynchronizer> {
 public:
  LibrarySync(transport::Transport& transport, const Model& model, const PolicyNames& policies, Options options,
              Statistics* report = nullptr)
      : SynchronizerHook(transport, model, std::move(options), AnySynchronizer::parse(policies), report) {}
};

}  // namespace gradsync::trainer
