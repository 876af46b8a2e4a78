// gradsync-sim: simulates training iterations of a model profile with gradsync's own slicing and
// priority policies and a cost model of the codec, the collective and the network (README.md).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include <gradsync/transport/link.hpp>
#include <gradsync/priority/any.hpp>
#include <gradsync/sim/models.hpp>
#include <gradsync/sim/simulator.hpp>
#include <gradsync/sim/tuner.hpp>
#include <gradsync/slicing/any.hpp>

#include "sim_json.hpp"

namespace sim = gradsync::sim;

namespace {

std::array<std::size_t, 3> parse_input(const std::string& text) {
  std::array<std::size_t, 3> shape{};
  std::size_t at = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t x = text.find('x', at);
    const std::string part = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || (i < 2) == (x == std::string::npos))
      throw gradsync::ConfigError("--input: expected CxHxW such as 3x224x224, got '" + text + "'");
    shape[i] = std::stoul(part);
    at = x + 1;
  }
  return shape;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 1e-3 || s == 0 ? "%.4g s" : "%.4g us", s >= 1e-3 || s == 0 ? s : s * 1e6);
  return buf;
}

/// --tune: the ranking's head, P3's default setting for comparison, and every setting as JSON.
int print_tuning(const sim::Profile& profile, const sim::Network& net, const sim::TuneSpace& space,
                 const std::string& json_path) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto ranked = sim::tune(profile, net, space);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const sim::Setting* p3 = sim::p3_default(ranked, net.ranks);
  std::printf("%s x%d ranks, %s %s, %.4g Gbit/s: %zu settings simulated in %.3f s\n", profile.name.c_str(), net.ranks,
              space.priority.c_str(), space.codec.c_str(), net.bytes_per_second * 8 / 1e9, ranked.size(), wall);
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const sim::Setting& s = ranked[i];
    if (i >= 5 && &s != p3) continue;
    std::printf("%3zu. --slicing %s --collective %s --inflight %zu --credit %zu: %s/iteration%s\n", i + 1,
                s.slicing.c_str(), s.collective.c_str(), s.inflight_units, s.credit_bytes >> 20,
                seconds_text(s.iteration_seconds).c_str(), &s == p3 ? " (P3's default)" : "");
  }
  if (!json_path.empty()) {
    nlohmann::json settings = nlohmann::json::array();
    for (const sim::Setting& s : ranked)
      settings.push_back({{"slicing", s.slicing}, {"collective", s.collective}, {"inflight_units", s.inflight_units},
                          {"credit_bytes", s.credit_bytes}, {"iteration_seconds", s.iteration_seconds}});
    sim::write_json({{"model", profile.name}, {"ranks", net.ranks}, {"bytes_per_second", net.bytes_per_second},
                     {"priority", space.priority}, {"codec", space.codec}, {"tuning_wall_seconds", wall},
                     {"settings", settings}},
                    json_path);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gradsync-sim: simulate data-parallel training iterations with gradsync's policies"};
  std::string model = "resnet50", profile_path, input, write_profile, json_path, trace_path;
  std::string slicing = "fixed:40000", priority = "forward", codec = "fp32", collective = "ring";
  std::string bandwidth = "10gbit", latency, links;
  sim::Estimate estimate;
  double gflops = estimate.flops_per_second / 1e9;
  int ranks = 16, groups = 0, servers = 0;
  std::size_t inflight = 0, iterations = 10;
  double credit_mb = 0, encode_gbps = -1, decode_gbps = -1, sum_gbps = -1;
  bool no_events = false, no_skew = false, tune = false, tensor_pull = false;
  std::vector<std::string> tune_collectives{"ring"};

  auto* model_opt = app.add_option("--model", model, "Built-in profile: " + std::string(sim::builtin_profiles))
                        ->capture_default_str();
  app.add_option("--profile", profile_path, "Model profile (JSON; schema in tools/sim/README.md)")
      ->excludes(model_opt);
  app.add_option("--batch", estimate.batch, "Built-in profiles: samples per rank per iteration")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--gflops", gflops, "Built-in profiles: sustained GFLOP/s of one rank")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--input", input, "Built-in profiles: input shape CxHxW (default: the model's)");
  app.add_option("--classes", estimate.classes, "Built-in profiles: classes (default: the model's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--slicing", slicing, "Slicing policy (as gradsync-train)")->capture_default_str();
  app.add_option("--priority", priority, "Priority policy (as gradsync-train)")->capture_default_str();
  app.add_option("--codec", codec, "Codec (as gradsync-train)")->capture_default_str();
  app.add_option("--collective", collective, "Collective (as gradsync-train)")->capture_default_str();
  app.add_option("--ranks", ranks, "Data-parallel ranks")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  app.add_option("--bandwidth", bandwidth, "Link per rank and direction: 1gbit, 300mbit, 10gbit+20us, 1gbit/nic ...")
      ->capture_default_str();
  app.add_option("--latency", latency, "One-way latency per message: 20us, 1ms (overrides +lat in --bandwidth)");
  app.add_option("--links", links, "nic: a rank's sends share its NIC (default); pair: a link per pair of ranks")
      ->check(CLI::IsMember({"nic", "pair"}));
  app.add_option("--groups", groups, "Ranks per group for hierarchical and hybrid (their ':k')")
      ->check(CLI::PositiveNumber);
  app.add_option("--servers", servers, "ps: dedicated server machines (0: a shard on every rank, gradsync's)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--inflight", inflight, "Units in flight at once (Options::inflight_units; 0: the library's default)")
      ->capture_default_str();
  app.add_option("--credit", credit_mb, "MiB of fp32 units in flight at once (Options::credit_bytes; 0: the library's)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--encode-gbps", encode_gbps, "Codec encode GB/s of fp32 (default: bench_codec's; 0: free)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--decode-gbps", decode_gbps, "Codec decode GB/s of fp32 (default: bench_codec's; 0: free)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--tensor-pull", tensor_pull,
               "ps: pull a tensor only once all of it is aggregated (MXNet KVStore, P3's baseline; with "
               "--slicing split:<servers>)");
  app.add_option("--sum-gbps", sum_gbps, "ps: the server's add rate, GB/s of fp32 (default 10.34; 0: free)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", iterations, "Iterations to simulate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json_path, "Write times, utilization and every event here (JSON)");
  app.add_option("--trace", trace_path, "Write a Chrome trace of the simulated timeline (open in Perfetto)");
  app.add_option("--write-profile", write_profile, "Write the profile used as JSON (a start for your own)");
  app.add_flag("--no-events", no_events, "Keep only times and utilization (faster, smaller --json)");
  app.add_flag("--no-rank-skew", no_skew,
               "Every rank at the profile's layer times every iteration (ignore its measured iteration_seconds)");
  app.add_flag("--tune", tune,
               "Choose --slicing, --inflight, --credit and --collective: simulate a grid of them and print the "
               "fastest (with --json, every setting ranked)");
  app.add_option("--tune-collectives", tune_collectives, "--tune: the collectives it may choose")
      ->delimiter(',')->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    estimate.flops_per_second = gflops * 1e9;
    if (!input.empty()) estimate.input = parse_input(input);
    const sim::Profile profile = profile_path.empty() ? sim::builtin_profile(model, estimate) : sim::read_profile(profile_path);
    if (!profile_path.empty() && (app.count("--batch") || app.count("--gflops") || app.count("--input") || app.count("--classes")))
      throw gradsync::ConfigError("--batch, --gflops, --input and --classes shape built-in profiles; a --profile file "
                                  "has its own sizes and times");

    const gradsync::transport::Link link = gradsync::transport::Link::parse(bandwidth);
    sim::Network net = sim::Network::from(link, ranks);
    if (!latency.empty()) {
      const auto l = gradsync::transport::Link::parse_latency(latency);
      if (!l) throw gradsync::ConfigError("--latency: expected <n>us or <n>ms (e.g. 20us), got '" + latency + "'");
      net.latency_seconds = std::chrono::duration<double>(*l).count();
    }
    net.shared_nic = links.empty() || links == "nic" || link.shared_nic;
    if (links == "pair" && link.shared_nic)
      throw gradsync::ConfigError("--links pair contradicts the /nic of --bandwidth " + bandwidth + ": drop one");

    sim::CollectiveModel coll = sim::CollectiveModel::parse(collective);
    using Kind = sim::CollectiveModel::Kind;
    if (groups > 0) {
      if (coll.kind != Kind::hierarchical && coll.kind != Kind::hybrid)
        throw gradsync::ConfigError("--groups sizes the groups of hierarchical and hybrid, not of '" + collective + "'");
      if (coll.group > 0 && coll.group != groups)
        throw gradsync::ConfigError("--groups " + std::to_string(groups) + " contradicts --collective " + collective +
                                    ": give the group size once");
      coll.group = groups;
    }
    if (servers > 0 && coll.kind != Kind::ps)
      throw gradsync::ConfigError("--servers places parameter servers: use it with --collective ps");
    net.dedicated_servers = servers;
    if (tensor_pull && coll.kind != Kind::ps)
      throw gradsync::ConfigError("--tensor-pull models MXNet KVStore's parameter server: use it with --collective ps");
    coll.tensor_pull = tensor_pull;

    sim::CodecModel codec_model = sim::CodecModel::parse(codec);
    if (encode_gbps >= 0) codec_model.encode_gbps = encode_gbps;
    if (decode_gbps >= 0) codec_model.decode_gbps = decode_gbps;
    if (sum_gbps >= 0) codec_model.sum_gbps = sum_gbps;

    sim::Options opt{.iterations = iterations, .record = !no_events, .rank_skew = !no_skew};
    opt.inflight_units = inflight > 0 ? inflight : gradsync::default_inflight_units(net.ranks);
    if (credit_mb > 0) opt.credit_bytes = static_cast<std::size_t>(credit_mb * 1024 * 1024);

    if (!write_profile.empty()) sim::write_json(sim::profile_json(profile), write_profile, 1);
    if (tune) {
      for (const char* chosen : {"--slicing", "--inflight", "--credit", "--collective"})
        if (app.count(chosen))
          throw gradsync::ConfigError(std::string("--tune chooses ") + chosen +
                                      ": drop it (limit the collectives with --tune-collectives)");
      return print_tuning(profile, net, {.collectives = tune_collectives, .priority = priority, .codec = codec},
                          json_path);
    }
    const auto slicing_policy = gradsync::slicing::AnySlicing::parse(slicing);
    const auto priority_policy = gradsync::priority::AnyPriority::parse(priority);
    const auto t0 = std::chrono::steady_clock::now();
    const sim::Result r = sim::simulate(profile, slicing_policy, priority_policy, codec_model, coll, net, opt);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    char link_text[32];
    std::snprintf(link_text, sizeof link_text, "%g", link.gbit);
    std::string util;
    for (const auto& u : r.resources) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s %.0f%%%s", std::string(u.name).c_str(), 100 * u.mean, u.instances > 1 ? " (mean)" : "");
      util += (util.empty() ? "" : ", ") + std::string(buf);
    }
    std::printf("%s x%d ranks, %s %s %s %s, %sgbit %s +%s: %s/iteration (compute %s, busiest link %s), %s; "
                "%zu iterations, %zu units, simulated in %.3f s\n",
                profile.name.c_str(), ranks, slicing_policy.describe().c_str(), priority_policy.describe().c_str(),
                codec_model.describe().c_str(), coll.describe().c_str(), link_text,
                net.shared_nic ? "nic" : "per pair", seconds_text(net.latency_seconds).c_str(),
                seconds_text(r.steady_iteration_seconds()).c_str(), seconds_text(profile.compute_seconds()).c_str(),
                seconds_text(r.wire_seconds_per_iteration()).c_str(), util.empty() ? "no communication" : util.c_str(),
                iterations, r.units.size(), wall);

    if (!json_path.empty()) {
      nlohmann::json config = {{"model", profile.name}, {"ranks", ranks}, {"slicing", slicing_policy.describe()},
                               {"priority", priority_policy.describe()}, {"codec", codec_model.describe()},
                               {"collective", coll.describe()}, {"tensor_pull", coll.tensor_pull},
                               {"bytes_per_second", net.bytes_per_second},
                               {"latency_seconds", net.latency_seconds}, {"shared_nic", net.shared_nic},
                               {"dedicated_servers", net.dedicated_servers}, {"inflight_units", opt.inflight_units},
                               {"credit_bytes", opt.credit_bytes}, {"iterations", iterations},
                               {"encode_gbps", codec_model.encode_gbps}, {"decode_gbps", codec_model.decode_gbps},
                               {"sum_gbps", codec_model.sum_gbps}, {"simulation_wall_seconds", wall}};
      sim::write_json(sim::result_json(r, profile, std::move(config)), json_path);
    }
    if (!trace_path.empty()) sim::write_json(sim::trace_json(r, profile), trace_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradsync-sim: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
