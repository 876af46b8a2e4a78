#pragma once
/// ParameterSlot: what the Attachment keeps of one parameter through an iteration - where it is in
/// the layout, whether its gradient was handed over and its optimizer step is still to come, the
/// .grad it handed over (the aggregate lands in that memory) and the zeroing asked for meanwhile.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "../core/error.hpp"

namespace gradsync::torch {

/// How zero_grad() clears a .grad once its parameter's step is done.
enum class Zero : std::uint8_t { none, fill, reset };

struct ParameterSlot {
  bool trainable = false;
  std::uint32_t layer = 0;  ///< in the layout (trainable ones)
  unsigned passes = 0;      ///< gradients accumulated this iteration
  bool handed = false;      ///< handed over this iteration
  bool pending = false;     ///< its optimizer step (of the last finished iteration) is still to come
  bool made_grad = false;   ///< it had no gradient: step() made zeros
  /// The .grad handed over, held until its step: the aggregate is written into its memory, and
  /// the step needs it even if .grad was set to None meanwhile.
  at::Tensor handed_grad;
  std::int64_t handed_version = 0;  ///< handed_grad's version counter then: a change means in-place edits
  bool landed = false;              ///< its aggregate is in handed_grad and was checked
  Zero zero = Zero::none;           ///< zero_grad() asked, to do after the pending step

  /// Holds `g`, the .grad about to be handed over.
  void hold(const at::Tensor& g) {
    handed_grad = g;
    handed_version = g._version();
    landed = false;
  }

  /// The aggregate has landed in handed_grad; `g` is the parameter's .grad now. Refuses a .grad
  /// replaced or edited in place meanwhile (the aggregate would be lost or mixed with it); a .grad
  /// set to None (zero_grad on the model or on the wrapped optimizer: PyTorch 2's default) gets the
  /// aggregate back for the step and is set to None after it.
  void take_landed(at::Tensor& g, const std::string& name) {
    if (!handed_grad.defined()) return;
    if (!g.defined()) {
      g = handed_grad;
      if (zero == Zero::none) zero = Zero::reset;
    } else if (!landed && (!g.is_same(handed_grad) || g._version() != handed_version)) {
      throw UsageError("gradsync: parameter '" + name + "': its .grad was changed while gradsync was aggregating "
                       "it (zeroed in place or replaced), so the aggregate would be lost; zero gradients with the "
                       "DistributedOptimizer's zero_grad() (not the model's or the wrapped optimizer's), and edit "
                       ".grad (clipping, unscaling) only after synchronize()");
    }
    landed = true;
  }

  /// After the step: clears `g` as zero_grad() asked, and forgets the iteration's .grad.
  void stepped(at::Tensor& g) {
    clear(g, zero);
    zero = Zero::none;
    pending = false;
    made_grad = false;
    handed_grad.reset();
  }

  static void clear(at::Tensor& g, Zero how) {
    if (!g.defined() || how == Zero::none) return;
    if (how == Zero::reset) g.reset();
    else g.zero_();
  }
  static bool all_zero(const at::Tensor& g) {
    const float* x = g.data_ptr<float>();
    return std::all_of(x, x + g.numel(), [](float v) { return v == 0.0f; });
  }
};

}  // namespace gradsync::torch
