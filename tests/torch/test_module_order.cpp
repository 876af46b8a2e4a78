// torch/module_order.hpp: the attachment's first iteration - which module's forward steps each
// parameter, the layout order, and the timings - without LibTorch.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <vector>

#include <gradsync/torch/module_order.hpp>

using namespace gradsync;
using torch::FirstIteration;
using torch::ModuleNode;
using torch::ModuleOrder;
using Catch::Matchers::Contains;
using Indices = std::vector<std::size_t>;

namespace {

/// A point `ms` milliseconds into the iteration.
ModuleOrder::clock::time_point at(int ms) { return ModuleOrder::clock::time_point(std::chrono::milliseconds(1000 + ms)); }

/// root(0) -> a(1) owns p0 p1, b(2) owns p2, c(3) owns p3, d(4) owns p4; a -> a.inner(5) owns p5.
std::vector<ModuleNode> tree() {
  return {{"", -1, {}}, {"a", 0, {0, 1}}, {"b", 0, {2}}, {"c", 0, {3}}, {"d", 0, {4}}, {"a.inner", 1, {5}}};
}

}  // namespace

TEST_CASE("ModuleOrder: parameters are laid out in the order their modules' forwards first ran") {
  ModuleOrder order(tree(), 6, {0, 1, 2, 3, 4, 5});
  for (std::size_t m : {0, 3, 1, 2, 4}) order.forward_started(m);
  order.forward_started(3);  // a module that runs again keeps its first place
  order.forward_started(1);
  const ModuleOrder::Steps s = order.steps();
  // a.inner never ran: its parameter goes with its nearest running ancestor, a.
  CHECK(s.order == Indices{3, 0, 1, 5, 2, 4});
  CHECK(s.by_module == std::vector<Indices>{{}, {0, 1, 5}, {2}, {3}, {4}, {}});
  CHECK(s.unhooked.empty());
}

TEST_CASE("ModuleOrder: parameters of modules that never ran go last, stepped by no module") {
  ModuleOrder order(tree(), 6, {0, 1, 2, 3, 4, 5});
  order.forward_started(2, at(0));
  order.forward_started(1, at(5));
  const ModuleOrder::Steps s = order.steps();
  CHECK(s.order == Indices{2, 0, 1, 5, 3, 4});
  CHECK(s.unhooked == Indices{3, 4});
  CHECK(s.by_module[3].empty());
  CHECK(s.by_module[4].empty());
  const FirstIteration f = order.first_iteration(s.order);
  REQUIRE(f.layers.size() == 3);
  CHECK(f.layers[2].name == "(modules whose forward did not run)");
  CHECK(f.layers[2].tensors == Indices{4, 5});
  CHECK(f.layers[2].forward_seconds == 0);
}

TEST_CASE("ModuleOrder: a tied parameter goes with the first of its modules to run, and frozen ones are left out") {
  // p1 is tied: a and c own it. p2 is frozen (not trainable).
  ModuleOrder order({{"", -1, {}}, {"a", 0, {0, 1}}, {"b", 0, {2}}, {"c", 0, {1, 3}}}, 4, {0, 1, 3});
  for (std::size_t m : {0, 3, 2, 1}) order.forward_started(m);
  const ModuleOrder::Steps s = order.steps();
  CHECK(s.order == Indices{1, 3, 0});
  CHECK(s.by_module == std::vector<Indices>{{}, {0}, {}, {1, 3}});
}

TEST_CASE("ModuleOrder: a parameter owned by the root, whose forward runs first, goes first") {
  ModuleOrder order({{"", -1, {2}}, {"a", 0, {0}}, {"b", 0, {1}}}, 3, {0, 1, 2});
  for (std::size_t m : {0, 2, 1}) order.forward_started(m);
  CHECK(order.steps().order == Indices{2, 1, 0});
}

TEST_CASE("ModuleOrder: the first iteration's timings, per module in forward order") {
  ModuleOrder order(tree(), 6, {0, 1, 2, 3, 4, 5});
  order.forward_started(0, at(0));
  order.forward_started(3, at(1));
  order.forward_started(1, at(4));
  order.forward_started(2, at(10));
  order.forward_started(3, at(12));  // again: neither its place nor its time changes
  // Backward, in reverse: b's gradient 20 ms after the last forward start, then a's two, then c's.
  order.gradient_arrived(2, at(30));
  order.gradient_arrived(1, at(33));
  order.gradient_arrived(0, at(34));
  order.gradient_arrived(5, at(36));
  order.gradient_arrived(3, at(40));
  order.gradient_arrived(3, at(90));  // a second backward pass: the first gradient counts
  const ModuleOrder::Steps s = order.steps();
  REQUIRE(s.order == Indices{4, 3, 0, 1, 5, 2});  // d never ran: its parameter goes with the root
  // Rank 0's layout order may differ from this rank's: positions follow the layout given.
  const Indices layout{0, 1, 2, 3, 4, 5};
  const FirstIteration f = order.first_iteration(layout);
  REQUIRE(f.layers.size() == 4);
  const std::vector<const char*> names{"", "c", "a", "b"};
  const std::vector<double> forward{0.001, 0.003, 0.006, 0.0};
  const std::vector<double> backward{0.0, 0.004, 0.006, 0.020};
  const std::vector<Indices> tensors{{4}, {3}, {0, 1, 5}, {2}};
  for (std::size_t k = 0; k < f.layers.size(); ++k) {
    INFO("layer " << k);
    CHECK(f.layers[k].name == names[k]);
    CHECK(f.layers[k].forward_seconds == Approx(forward[k]).margin(1e-12));
    CHECK(f.layers[k].backward_seconds == Approx(backward[k]).margin(1e-12));
    CHECK(f.layers[k].tensors == tensors[k]);
  }
  CHECK(order.first_iteration(s.order).layers[2].tensors == Indices{2, 3, 4});
}

TEST_CASE("ModuleOrder: a gradient before any forward start, or of a module that never ran, adds no time") {
  ModuleOrder order(tree(), 6, {0, 1, 2, 3, 4, 5});
  order.gradient_arrived(0, at(1));  // no forward start yet to measure from
  order.forward_started(1, at(2));
  order.gradient_arrived(4, at(3));  // d never ran
  const FirstIteration f = order.first_iteration(order.steps().order);
  REQUIRE(f.layers.size() == 2);
  CHECK(f.layers[0].backward_seconds == 0);
  CHECK(f.layers[1].backward_seconds == 0);
}

TEST_CASE("ModuleOrder refuses what names no module or parameter, and a model with nothing to train") {
  ModuleOrder order(tree(), 6, {0, 1, 2, 3, 4, 5});
  CHECK(order.modules() == 6);
  CHECK_NOTHROW(order.check_module(5));
  CHECK_THROWS_AS(order.check_module(6), UsageError);
  CHECK_THROWS_WITH(order.forward_started(6), "gradsync: before_forward(6): the model has 6 modules");
  CHECK_THROWS_WITH(ModuleOrder({{"", -1, {}}, {"a", 2, {}}, {"b", 0, {}}}, 0, {}),
                    Contains("module 1 ('a') has parent 2; a module's parent is an earlier module"));
  CHECK_THROWS_WITH(ModuleOrder({{"", -1, {}}, {"a", 1, {}}}, 0, {}), Contains("module 1 ('a') has parent 1"));
  CHECK_THROWS_WITH(ModuleOrder({{"", -1, {0}}, {"a", 0, {3}}}, 3, {0}),
                    Contains("module 1 ('a') owns parameter 3; the model has 3 parameters"));
  CHECK_THROWS_WITH(ModuleOrder(tree(), 6, {1, 0}), Contains("ascending indices below 6"));
  CHECK_THROWS_WITH(ModuleOrder(tree(), 6, {0, 6}), Contains("ascending indices below 6"));
  CHECK_THROWS_WITH(ModuleOrder(tree(), 6, {}).steps(), "gradsync: the model has no trainable parameter");
}
