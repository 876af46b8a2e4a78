#pragma once
// Test support: the Synchronizer the CUDA trainer builds (policies chosen by name, the codec in
// codec::OnDevice over a Space: cuda::Device, or the host twin GuardedDevice) and the runs the
// device tests compare with the host AnySynchronizer's.
#include <gradsync/any_synchronizer.hpp>
#include <gradsync/codec/on_device.hpp>

#include "reference.hpp"

namespace testing {

template <class Space>
using DeviceSynchronizer = gradsync::Synchronizer<gradsync::slicing::AnySlicing, gradsync::priority::AnyPriority,
                                                  gradsync::codec::OnDevice<gradsync::codec::AnyCodec, Space>,
                                                  gradsync::collective::AnyCollective>;

template <class Space>
typename DeviceSynchronizer<Space>::Policies on_device(const gradsync::AnySynchronizer::Policies& p) {
  return {p.slicing, p.priority, {p.codec}, p.collective};
}

/// Every rank's aggregates over uneven_layout(): gradients in host memory through AnySynchronizer,
/// or in Gradient memory through DeviceSynchronizer<Space>.
template <class Space, class Gradient>
std::vector<Aggregates> run_policies(const gradsync::PolicyNames& names, int ranks, bool device) {
  return run_ranks<Aggregates>(ranks, [&](int r, gradsync::transport::Transport& t) {
    const auto policies = gradsync::AnySynchronizer::parse(names);
    if (!device) {
      gradsync::AnySynchronizer sync(t, uneven_layout(), {}, policies);
      return train_with(sync, r);
    }
    DeviceSynchronizer<Space> sync(t, uneven_layout(), {}, on_device<Space>(policies));
    for (std::size_t l = 0; l < sync.layout().num_layers(); ++l)
      if (!sync.device_refusal(l).empty()) throw std::logic_error("refused: " + sync.device_refusal(l));
    return train_with<Gradient>(sync, r);
  });
}

}  // namespace testing
