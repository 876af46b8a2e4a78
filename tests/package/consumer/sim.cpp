// gradsync::sim from outside: the model of P3's Figure 4 toy (3 layers, 2 ranks at 1 Gbit/s), and a
// model profile read back from its JSON form (gradsync/sim/profile_json.hpp: nlohmann_json comes
// with the target).
#include <cstdio>

#include <gradsync/priority/forward_order.hpp>
#include <gradsync/sim/models.hpp>
#include <gradsync/sim/profile_json.hpp>
#include <gradsync/sim/simulator.hpp>
#include <gradsync/slicing/whole_layer.hpp>

int main() {
  namespace sim = gradsync::sim;
  const sim::Profile profile = sim::builtin_profile("p3-fig4", {});
  const sim::Profile back = sim::profile_from_json(sim::profile_json(profile), "memory");
  const auto net = sim::Network::from(gradsync::transport::Link::parse("1gbit"), 2);
  const auto r = sim::simulate(back, gradsync::slicing::WholeLayer{}, gradsync::priority::ForwardOrder{},
                               sim::CodecModel::parse("fp32"), sim::CollectiveModel::parse("ring"), net, {});
  std::printf("simulated %zu layers: %.2f s per iteration\n", back.layers.size(), r.steady_iteration_seconds());
  return back.layers.size() == profile.layers.size() && r.steady_iteration_seconds() > 0 ? 0 : 1;
}
