// schedule::UnitTable against a plain model of it: over random layouts cut into units that span
// layer boundaries, a unit is ready (once) in the hand-over that completes its last layer, a layer
// is done once every unit carrying it is complete, iterations start over; residuals lie back to
// back in unit order, none for bypassed units.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <gradsync/schedule/units.hpp>

using namespace gradsync;
using schedule::UnitTable;

namespace {
/// The layers laid end to end and cut every `chunk` elements: units carry parts of several layers.
std::vector<Unit> packed(const ModelLayout& layout, std::size_t chunk) {
  std::vector<Unit> units(1);
  for (std::uint32_t l = 0; l < layout.num_layers(); ++l)
    for (std::size_t off = 0; off < layout.layer(l).elements;) {
      if (units.back().elements == chunk) units.emplace_back();
      const std::size_t n = std::min(chunk - units.back().elements, layout.layer(l).elements - off);
      units.back().segments.push_back({l, off, n});
      units.back().elements += n;
      off += n;
    }
  return units;
}

ModelLayout random_layout(std::mt19937& rng) {
  std::vector<LayerSpec> layers(std::uniform_int_distribution<std::size_t>(1, 9)(rng));
  for (std::size_t l = 0; l < layers.size(); ++l)
    layers[l] = {std::string(1, static_cast<char>('a' + l)), std::uniform_int_distribution<std::size_t>(1, 40)(rng)};
  return ModelLayout(layers);
}

std::set<std::uint32_t> layers_of(const Unit& u) {
  std::set<std::uint32_t> s;
  for (const Segment& g : u.segments) s.insert(g.layer);
  return s;
}
}  // namespace

TEST_CASE("units are ready in the hand-over that completes their last layer, layers done when their units are") {
  std::mt19937 rng(GENERATE(range(1u, 41u)));
  const ModelLayout layout = random_layout(rng);
  const std::vector<Unit> units = packed(layout, std::uniform_int_distribution<std::size_t>(1, 60)(rng));
  UnitTable table(layout, units, 0, false, "packed");
  REQUIRE(table.size() == units.size());
  std::vector<std::vector<float>> grad(layout.num_layers());
  for (std::size_t l = 0; l < grad.size(); ++l) {
    grad[l].resize(layout.layer(l).elements);
    REQUIRE(table.submitted(l) == -1);
    REQUIRE(table.layer_done(l));  // never handed over: nothing to wait for
  }
  for (std::int64_t it = 0; it < 3; ++it) {
    std::vector<std::uint32_t> order(layout.num_layers());
    std::iota(order.begin(), order.end(), 0u);
    std::ranges::shuffle(order, rng);
    std::set<std::uint32_t> handed, ready_so_far;
    for (std::uint32_t l : order) {
      handed.insert(l);
      std::vector<std::uint32_t> ready;
      table.hand_over(l, grad[l], it, [&](std::uint32_t u) { ready.push_back(u); });
      REQUIRE(table.submitted(l) == it);
      REQUIRE_FALSE(table.layer_done(l));
      // The model: the units carrying l whose layers are now all handed over.
      std::vector<std::uint32_t> want;
      for (std::uint32_t u = 0; u < units.size(); ++u) {
        const auto ls = layers_of(units[u]);
        if (ls.contains(l) && std::ranges::includes(handed, ls)) want.push_back(u);
      }
      std::ranges::sort(ready);
      CAPTURE(it, l);
      REQUIRE(ready == want);
      for (std::uint32_t u : ready) {
        REQUIRE(ready_so_far.insert(u).second);  // once per iteration
        REQUIRE(table.ready_iteration(u) == it);
      }
    }
    REQUIRE(ready_so_far.size() == units.size());
    // Complete the units in a random order; a layer is done exactly when its last unit is.
    std::vector<std::uint32_t> done(units.size());
    std::iota(done.begin(), done.end(), 0u);
    std::ranges::shuffle(done, rng);
    std::set<std::uint32_t> completed;
    for (std::uint32_t u : done) {
      REQUIRE_FALSE(table.all_done());
      std::size_t done_before = 0, done_after = 0;
      for (std::uint32_t l = 0; l < layout.num_layers(); ++l) done_before += table.layer_done(l);
      const bool finished_a_layer = table.complete(u);
      completed.insert(u);
      for (std::uint32_t l = 0; l < layout.num_layers(); ++l) {
        bool all = true;
        for (std::uint32_t v = 0; v < units.size(); ++v)
          if (layers_of(units[v]).contains(l) && !completed.contains(v)) all = false;
        REQUIRE(table.layer_done(l) == all);
        done_after += all;
      }
      REQUIRE(finished_a_layer == (done_after > done_before));  // what wakes the caller's wait
    }
    REQUIRE(table.all_done());
  }
}

TEST_CASE("a fused unit waits for each of its layers in every iteration, and its spans are the caller's") {
  const ModelLayout layout{{"a", 4}, {"b", 3}, {"c", 5}};
  // unit 0: a whole; unit 1: b and the head of c; unit 2: c's tail
  std::vector<Unit> units{{{{0, 0, 4}}, 4}, {{{1, 0, 3}, {2, 0, 2}}, 5}, {{{2, 2, 3}}, 3}};
  UnitTable table(layout, units, 0, false, "hand-made");
  std::vector<float> a(4), b(3), c(5);
  std::iota(c.begin(), c.end(), 10.0f);
  for (std::int64_t it = 0; it < 2; ++it) {
    std::vector<std::uint32_t> ready;
    const auto note = [&](std::uint32_t u) { ready.push_back(u); };
    table.hand_over(2, c, it, note);
    REQUIRE(ready == std::vector<std::uint32_t>{2});  // c's tail alone; unit 1 still needs b
    REQUIRE(table.ready_iteration(1) == it - 1);
    table.hand_over(1, b, it, note);
    REQUIRE(ready == std::vector<std::uint32_t>{2, 1});
    REQUIRE(table.ready_iteration(1) == it);
    table.hand_over(0, a, it, note);
    REQUIRE(ready == std::vector<std::uint32_t>{2, 1, 0});
    // Each segment's span is the caller's memory: executors write aggregates through it.
    const std::span<float> head = table.span(units[1].segments[1]);
    REQUIRE(head.data() == c.data());
    REQUIRE(head.size() == 2);
    REQUIRE(table.span(units[2].segments[0]).data() == c.data() + 2);
    REQUIRE_FALSE(table.complete(2));
    REQUIRE_FALSE(table.layer_done(2));  // unit 1 carries c's head
    REQUIRE(table.layer_done(0) == false);
    REQUIRE(table.complete(1));
    REQUIRE(table.layer_done(1));
    REQUIRE(table.layer_done(2));
    REQUIRE(table.complete(0));
    REQUIRE(table.all_done());
  }
}

TEST_CASE("residuals lie back to back in unit order, and bypassed units and residual-free codecs keep none") {
  const ModelLayout layout{{"big", 100}, {"small", 8}, {"big2", 50}};
  // unit 1 carries only the small tensor (bypassed under 10 elements); unit 2 fuses small and big2
  std::vector<Unit> units{{{{0, 0, 60}}, 60}, {{{1, 0, 4}}, 4}, {{{1, 4, 4}, {2, 0, 50}}, 54}, {{{0, 60, 40}}, 40}};
  SECTION("with residuals") {
    UnitTable table(layout, units, 10, true, "hand-made");
    REQUIRE_FALSE(table.bypassed(0));
    REQUIRE(table.bypassed(1));
    REQUIRE_FALSE(table.bypassed(2));  // one large tensor is enough to go through the codec
    REQUIRE(table.residuals().size() == 60 + 54 + 40);
    REQUIRE(table.residual(1).empty());
    const float* base = table.residuals().data();
    REQUIRE(table.residual(0).data() == base);
    REQUIRE(table.residual(0).size() == 60);
    REQUIRE(table.residual(2).data() == base + 60);
    REQUIRE(table.residual(2).size() == 54);
    REQUIRE(table.residual(3).data() == base + 114);
    REQUIRE(table.residual(3).size() == 40);
    REQUIRE(std::ranges::all_of(table.residuals(), [](float x) { return x == 0.0f; }));
    REQUIRE(table.max_elements() == 60);
  }
  SECTION("without") {
    UnitTable table(layout, units, 10, false, "hand-made");
    REQUIRE(table.residuals().empty());
    for (std::uint32_t u = 0; u < 4; ++u) REQUIRE(table.residual(u).empty());
  }
}

TEST_CASE("a plan that does not cover a layer exactly is refused, naming the slicing and the layer") {
  const ModelLayout layout{{"a", 4}, {"b", 3}};
  std::vector<Unit> short_of_b{{{{0, 0, 4}}, 4}, {{{1, 0, 2}}, 2}};
  REQUIRE_THROWS_WITH(UnitTable(layout, short_of_b, 0, false, "mine"),
                      Catch::Contains("slicing 'mine' covers 2 of the 3 elements of layer 1"));
}
