#pragma once
/// Fifo: units go in the order backpropagation makes them ready (wait-free backprop, the baseline
/// of every framework).
#include "concept.hpp"

namespace gradsync::priority {

struct Fifo {
  std::size_t levels(const ModelLayout&) const { return 1; }
  std::uint32_t key(const Unit&) const { return 0; }
  std::string_view name() const { return "fifo"; }
};
GRADSYNC_CHECK_PRIORITY(Fifo);

}  // namespace gradsync::priority
