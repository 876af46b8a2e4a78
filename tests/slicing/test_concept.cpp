// What every slicing promises (slicing/concept.hpp): units cover every element exactly once.
#include <catch2/catch.hpp>

#include <gradsync/slicing/any.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

namespace {
// Every element of every layer is covered exactly once.
void require_exact_cover(const ModelLayout& layout, const std::vector<Unit>& units) {
  std::vector<std::vector<int>> hits(layout.num_layers());
  for (std::size_t l = 0; l < layout.num_layers(); ++l) hits[l].assign(layout.layer(l).elements, 0);
  for (const Unit& u : units) {
    std::size_t sum = 0;
    for (const Segment& s : u.segments) {
      REQUIRE(s.offset + s.length <= layout.layer(s.layer).elements);
      for (std::size_t i = 0; i < s.length; ++i) ++hits[s.layer][s.offset + i];
      sum += s.length;
    }
    REQUIRE(sum == u.elements);
  }
  for (const auto& h : hits)
    for (int c : h) REQUIRE(c == 1);
}
}  // namespace


TEST_CASE("every slicing covers every element exactly once") {
  const auto layout = testing::uneven_layout();
  for (const char* s : {"whole", "fixed", "fixed:1000", "fixed:1", "fusion", "fusion:4KiB", "slicefuse:3000", "split:3:1000"}) {
    INFO(s);
    require_exact_cover(layout, slicing::AnySlicing::parse(s).plan(layout));
  }
}
