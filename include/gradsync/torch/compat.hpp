#pragma once
/// What differs between the PyTorch versions the adapter supports, in one place: the rest of
/// gradsync/torch/ names these instead of testing versions itself.
///
/// Tested: PyTorch 1.13 (Debian bookworm's python3-torch / libtorch-dev) and 2.15 (the Python
/// registry's wheels). Another version fails to compile here, naming itself: the adapter leans on
/// autograd internals (the gradient accumulator's hooks, when .grad is final) that have changed
/// between releases without notice, and an untested one could train wrong without an error.
/// `-DGRADSYNC_ALLOW_UNTESTED_TORCH` builds anyway; run tests/torch against DDP before trusting it.
///
/// \code
///   gradsync::torch::compat::Accumulator acc = gradsync::torch::compat::grad_accumulator(weight);
/// \endcode
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>

#include <type_traits>
#include <utility>

#define GRADSYNC_TORCH_VERSION_IS(major, minor) (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR == (minor))
#if !(GRADSYNC_TORCH_VERSION_IS(1, 13) || GRADSYNC_TORCH_VERSION_IS(2, 15)) && !defined(GRADSYNC_ALLOW_UNTESTED_TORCH)
#define GRADSYNC_STR2(x) #x
#define GRADSYNC_STR(x) GRADSYNC_STR2(x)
#error "gradsync: PyTorch " GRADSYNC_STR(TORCH_VERSION_MAJOR) "." GRADSYNC_STR(TORCH_VERSION_MINOR) " is not one gradsync's PyTorch adapter is tested on (1.13, 2.15): install one of those (pip install torch==2.15.0), or build with -DGRADSYNC_ALLOW_UNTESTED_TORCH (CXXFLAGS) and run tests/torch against DDP before trusting it"
#endif
#undef GRADSYNC_TORCH_VERSION_IS

namespace gradsync::torch::compat {

/// A leaf tensor's gradient accumulator (the AccumulateGrad node), held strongly: the tensor holds
/// it weakly, and a new one (without gradsync's hooks) would be made for the next graph. A
/// std::shared_ptr<Node> in 1.13, a c10::intrusive_ptr<Node> in 2.x.
using Accumulator = std::decay_t<decltype(::torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))>;

inline Accumulator grad_accumulator(const at::Tensor& leaf) { return ::torch::autograd::impl::grad_accumulator(leaf); }

/// What torch::optim::Optimizer::zero_grad() does when not told: zero in place in 1.13, set the
/// gradients to None (undefined) from 2.0 on. gradsync's zero_grad defaults to the same, so a loop
/// computes what it computes without gradsync (an optimizer skips a parameter whose .grad is None).
inline constexpr bool zero_grad_sets_to_none = TORCH_VERSION_MAJOR >= 2;

}  // namespace gradsync::torch::compat
