#pragma once
/// ForwardOrder (P3, section 3): a unit inherits the priority of its layer, and the first layer of
/// the forward pass is the most urgent, because the next iteration needs it first. A fused unit
/// takes the priority of its earliest layer.
#include "concept.hpp"

namespace gradsync::priority {

struct ForwardOrder {
  std::size_t levels(const ModelLayout& layout) const { return layout.num_layers(); }
  std::uint32_t key(const Unit& u) const { return u.first_layer(); }
  std::string_view name() const { return "forward"; }
};
GRADSYNC_CHECK_PRIORITY(ForwardOrder);

}  // namespace gradsync::priority
