#pragma once
/// AnySlicing: a slicing chosen at run time from a string, for CLIs.
///
///   "whole"             WholeLayer
///   "fixed[:N]"         FixedSlices, N elements per slice (default 40000)
///   "fusion[:B]"        Fusion up to B bytes (default 1MiB; suffixes k, M, KiB, MiB)
///   "slicefuse[:N]"     SliceAndFuse around N elements (default 40000)
///   "split[:P[:N]]"     EvenSplit: layers of N elements or more in P equal parts (MXNet KVStore;
///                       default 4 parts from 10^6 elements)
#include <variant>

#include "../detail/parse.hpp"
#include "even_split.hpp"
#include "fusion.hpp"
#include "whole_layer.hpp"

namespace gradsync::slicing {

struct AnySlicing {
  std::variant<FixedSlices, WholeLayer, Fusion, SliceAndFuse, EvenSplit> policy;

  /// The policy strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar = "whole, fixed[:N], fusion[:BYTES], slicefuse[:N], split[:P[:N]]";

  static AnySlicing parse(std::string_view text) {
    const auto spec = gradsync::detail::split_policy(text);
    auto size = [&] { return gradsync::detail::parse_size(spec.arg, "slicing", text, grammar); };
    if (spec.name == "whole" && !spec.has_arg) return {WholeLayer{}};
    if (spec.name == "fixed") return {spec.has_arg ? FixedSlices{size()} : FixedSlices{}};
    if (spec.name == "fusion") return {spec.has_arg ? Fusion{size()} : Fusion{}};
    if (spec.name == "slicefuse") return {spec.has_arg ? SliceAndFuse{size()} : SliceAndFuse{}};
    if (spec.name == "split") {
      EvenSplit e;
      if (spec.has_arg) {
        const auto [parts, min, has_min] = gradsync::detail::split_policy(spec.arg);
        e.parts = static_cast<std::size_t>(gradsync::detail::parse_count(parts, "slicing", text, grammar));
        if (has_min) e.min_elements = gradsync::detail::parse_size(min, "slicing", text, grammar);
      }
      return {e};
    }
    gradsync::detail::bad_policy("slicing", text, grammar);
  }

  std::vector<Unit> plan(const ModelLayout& layout) const {
    return std::visit([&](const auto& p) { return p.plan(layout); }, policy);
  }
  std::string describe() const {
    return std::visit([](const auto& p) { return p.describe(); }, policy);
  }
};
GRADSYNC_CHECK_SLICING(AnySlicing);

}  // namespace gradsync::slicing
