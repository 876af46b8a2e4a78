#pragma once
// The adapter from the trainer's GradientSync hook to the library's Synchronizer: the whole of
// what a trainer needs to use gradsync (policies chosen by name at run time).
#include <gradsync/gradsync.hpp>

#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/sync.hpp"

namespace gradsync::trainer {

class LibrarySync final : public GradientSync {
 public:
  /// `report`, when given, receives this rank's statistics when the adapter is destroyed.
  LibrarySync(transport::Transport& transport, const Model& model, const PolicyNames& policies, Options options,
              Statistics* report = nullptr)
      : sync_(transport, layout(model), policies, std::move(options)), report_(report) {}
  ~LibrarySync() override {
    if (report_) *report_ = sync_.stats();
  }

  void gradient_ready(std::size_t tensor, std::span<float> grad) override { sync_.gradient_ready(tensor, grad); }
  void wait_for(std::size_t tensor) override { sync_.wait_for(tensor); }  // Options::average: the mean
  void finish_iteration() override { sync_.finish_iteration(); }
  std::span<const float> state() const override { return sync_.residuals(); }
  void load_state(std::size_t iteration, std::span<const float> saved) override {
    sync_.restore(std::int64_t(iteration), saved);
  }
  std::string describe() const override { return sync_.describe(); }
  void abort(const std::string& reason) override { sync_.abort(reason); }
  void report_loss(float loss) override { sync_.report_loss(loss); }
  Statistics statistics() const override { return sync_.stats(); }

  static ModelLayout layout(const Model& model) {
    std::vector<LayerSpec> specs;
    for (auto& [name, elements] : model.layout()) specs.push_back({name, elements});
    return ModelLayout{std::move(specs)};
  }

 private:
  AnySynchronizer sync_;
  Statistics* report_;
};

}  // namespace gradsync::trainer
