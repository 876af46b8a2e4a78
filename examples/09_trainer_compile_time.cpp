// 09: the reference trainer's library (target gradsync_trainer: tensors, layers, models, data,
// the training loop) with a Synchronizer whose policies are fixed at compile time, instead of
// gradsync-train's AnySynchronizer chosen by name.
//
// train(config, factory) runs config.ranks replicas on threads and calls the factory once per
// rank for its GradientSync: SynchronizerHook<Sync> (gradsync/trainer/library_sync.hpp) adapts any
// Synchronizer to that hook, so the trainer's forward pass calls wait_for and its backward pass
// gradient_ready, per tensor. Here: P3 slicing and priority with 8-bit QSGD over a ring, on a small
// ResNet-20 and four synthetic classes; the run must learn (test accuracy well above chance).
#include <cstdio>

#include "gradsync/trainer/library_sync.hpp"
#include "gradsync/trainer/trainer.hpp"

#include "example.hpp"

namespace gs = gradsync;
namespace gt = gradsync::trainer;

using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, gs::codec::Qsgd<8>,
                              gs::collective::Ring>;

int main() {
  return example::run([] {
    gt::TrainConfig config;
    config.model = {.name = "resnet20", .width = 0.125, .input = {1, 10, 10}, .classes = 4};
    config.dataset = "synthetic";
    config.synthetic_train = 512;
    config.synthetic_test = 256;
    config.batch = 16;
    config.epochs = 4;
    config.lr = 0.05f;
    config.ranks = 2;
    config.threads = 2;
    config.progress = false;

    constexpr int ranks = 2;
    gs::transport::InProcessGroup group(ranks, std::chrono::minutes(5));  // rank 0 evaluates while the other waits
    gs::Statistics rank0;
    const gt::SyncFactory factory = [&](std::size_t r, const gt::Model& model) -> std::unique_ptr<gt::GradientSync> {
      gs::Options options{.timeout = std::chrono::minutes(5)};
      return std::make_unique<gt::SynchronizerHook<Sync>>(group.rank(int(r)), model, options,
                                                          Sync::Policies{.slicing = {.max_elements = 5'000}},
                                                          r == 0 ? &rank0 : nullptr);
    };
    const gt::TrainResult result = gt::train(config, factory);
    std::printf("%zu iterations, test accuracy %.3f (chance: 0.25), rank 0 sent %.2f MB, %.0f%% of it compressed\n",
                result.iterations, result.test_accuracy, rank0.bytes_sent / 1e6, 100 * rank0.compressed_bytes_share());
    example::check(rank0.units > 0 && rank0.elements_compressed > 0, "gradients went through QSGD");
    example::check(result.test_accuracy > 0.5, "the model learned (test accuracy above 0.5 on 4 classes)");
  });
}
