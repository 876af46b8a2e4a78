// The one device instantiation of the Synchronizer (device_sync.hpp).
#include "device_sync.hpp"

#include <gradsync/cuda/on_device.cuh>

#include "gradsync/trainer/library_sync.hpp"

namespace gradsync::trainer {

// gradsync::cuda: within gradsync::trainer, `cuda` is the trainer's device backend
using DeviceSynchronizer = Synchronizer<slicing::AnySlicing, priority::AnyPriority,
                                        gradsync::cuda::OnDevice<codec::AnyCodec>, collective::AnyCollective>;

std::unique_ptr<GradientSync> make_device_sync(transport::Transport& transport, const Model& model, Options options,
                                               AnySynchronizer::Policies policies, Statistics* report) {
  return std::make_unique<SynchronizerHook<DeviceSynchronizer>>(
      transport, model, std::move(options),
      DeviceSynchronizer::Policies{std::move(policies.slicing), std::move(policies.priority), {std::move(policies.codec)},
                                   std::move(policies.collective)},
      report);
}

}  // namespace gradsync::trainer
