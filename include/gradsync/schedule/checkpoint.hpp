#pragma once
/// Checkpoint: what a resumed run needs to continue bit-identically, per rank, besides the
/// iteration count. It holds the units' residuals - the error-feedback memory of a codec with
/// codec::Traits::needs_residual (onebit, topk, ef+...) or what a collective holds back
/// (collective::Traits::holds_back), every unit's back to back in units() order (bypassed ones keep none)
/// - then what the collective learned from the training (collective::Runtime::save_state).
///
/// \code
///   std::vector<float> saved = schedule::checkpoint::save(table, runtime);  // between iterations, after wait_all()
///   schedule::checkpoint::load(table, runtime, saved, "fixed:40000/forward/onebit/ring");  // before the first hand-over
/// \endcode
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "../collective/concept.hpp"
#include "../core/error.hpp"
#include "units.hpp"

namespace gradsync::schedule {

namespace checkpoint {

inline std::size_t size(const UnitTable& table, const collective::Runtime& runtime) {
  return table.residuals().size() + runtime.state_size();
}

inline std::vector<float> save(const UnitTable& table, const collective::Runtime& runtime) {
  std::vector<float> s(size(table, runtime));
  const std::span<float> out(s);
  std::ranges::copy(table.residuals(), out.begin());
  runtime.save_state(out.subspan(table.residuals().size()));
  return s;
}

/// Throws UsageError when a unit was handed over already or the size differs; `policies` names
/// what the state must have been saved with.
inline void load(UnitTable& table, collective::Runtime& runtime, std::span<const float> state,
                 const std::string& policies) {
  if (state.size() != size(table, runtime))
    throw UsageError("gradsync: restore(): " + std::to_string(state.size()) + " values of state, but " + policies +
                     " with these units keeps " + std::to_string(size(table, runtime)) +
                     "; restore state saved with the same model, slicing, priority, codec and collective");
  for (std::size_t l = 0; l < table.layers(); ++l)
    if (table.submitted(l) != -1)
      throw UsageError("gradsync: restore() after gradient_ready; restore a newly constructed synchronizer");
  const std::size_t residuals = table.residuals().size();
  std::ranges::copy(state.first(residuals), table.residuals().begin());
  runtime.load_state(state.subspan(residuals));
}

}  // namespace checkpoint

}  // namespace gradsync::schedule
