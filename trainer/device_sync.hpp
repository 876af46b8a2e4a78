#pragma once
// gradsync-train-cuda's synchronizer: AnySynchronizer's policies with the codec wrapped in
// cuda::OnDevice<AnyCodec>, so a rank's gradients stay on the GPU wherever the policies allow
// (Synchronizer::device_refusal; the trainer stages them in host memory otherwise). Defined in
// device_sync.cu, compiled by nvcc for gradsync-train-cuda alone: it needs the device codecs and
// the collectives main.cpp parses (MPI, NCCL), so both see one AnyCollective.
#include <memory>

#include <gradsync/any_synchronizer.hpp>

#include "gradsync/trainer/model.hpp"
#include "gradsync/trainer/sync.hpp"

namespace gradsync::trainer {

/// SynchronizerHook over the device synchronizer; `report` as SynchronizerHook's.
std::unique_ptr<GradientSync> make_device_sync(transport::Transport& transport, const Model& model, Options options,
                                               AnySynchronizer::Policies policies, Statistics* report);

}  // namespace gradsync::trainer
