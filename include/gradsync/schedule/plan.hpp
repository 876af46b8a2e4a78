#pragma once
/// Plan: what a Synchronizer settles once, at construction, before any thread starts or any
/// message goes: that the policies fit together, the units (Slicing), which of them go as fp32
/// (codec/bypass.hpp), whether units keep a residual, how many units each priority lane may hold
/// (within the transport's tag space), and the text the ranks' handshake compares. It owns the
/// layout, the options and the policy values.
///
/// \code
///   schedule::Plan<Slicing, Priority, Codec, Collective> plan(layout, options, policies, transport.size());
///   schedule::UnitTable table(plan.layout, plan.units, plan.fp32_below, plan.residuals, plan.policies.slicing.describe());
///   schedule::handshake(transport, plan.hello);
/// \endcode
#include <string>
#include <vector>

#include "../codec/bypass.hpp"
#include "../codec/concept.hpp"
#include "../codec/memory.hpp"
#include "../codec/describe.hpp"
#include "../collective/concept.hpp"
#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../core/options.hpp"
#include "../core/unit.hpp"
#include "../detail/parse.hpp"
#include "../priority/concept.hpp"
#include "../transport/transport.hpp"
#include "handshake.hpp"

namespace gradsync::schedule {

/// The policy objects, by name: `{.codec = {.bucket = 1024}, .collective = {.group = 4}}`.
template <class Slicing, class Priority, class Codec, class Collective>
struct Policies {
  Slicing slicing{};
  Priority priority{};
  Codec codec{};
  Collective collective{};
};

template <class Slicing, class Priority, class Codec, class Collective>
class Plan {
 public:
  /// Throws ConfigError / UsageError naming what does not fit, before anything starts.
  Plan(ModelLayout layout_, Options options_, Policies<Slicing, Priority, Codec, Collective> policies_, int world)
      : layout(std::move(layout_)), options(gradsync::settled(std::move(options_), world)), policies(std::move(policies_)),
        fp32_below(bypass_threshold()), units(policies.slicing.plan(layout)), lane_capacity(lane_capacities()),
        describe(describe_policies()), hello(handshake_info(world)) {}

  ModelLayout layout;
  /// The caller's options with the library's choices made (Options::inflight_units).
  Options options;
  Policies<Slicing, Priority, Codec, Collective> policies;
  /// Units carrying only tensors under this many elements go as fp32 (codec/bypass.hpp).
  std::size_t fp32_below;
  std::vector<Unit> units;
  /// An error-feedback residual per unit: for a codec that keeps one, and for a collective that
  /// holds back parts of units.
  bool residuals = policies.codec.traits().needs_residual || policies.collective.traits().holds_back;
  /// How many units each priority lane may hold: as many as have its key.
  std::vector<std::size_t> lane_capacity;
  /// "fixed:40000/forward/qsgd8:bucket=1024/ring": the policies with every knob that differs from
  /// its default, as the handshake compares them.
  std::string describe;
  /// What the ranks compare at construction: the model, the world, and whatever else must agree -
  /// every policy with its knobs, and the options that change the sums (average) or their order
  /// and random numbers (inflight_units, seed). credit_bytes is rank 0's alone; timeout and
  /// check_finite are each rank's own.
  HandshakeInfo hello;

  /// The collective with its knobs ("hierarchical:2") when it has a describe(), so the handshake
  /// catches ranks that differ in them.
  std::string collective_text() const { return gradsync::detail::describe_policy(policies.collective); }

  /// Throws UsageError unless `layer` is one of the layout's; `who` names the caller.
  void check_layer(std::size_t layer, const char* who) const {
    if (layer >= layout.num_layers())
      throw UsageError("gradsync: " + std::string(who) + "(" + std::to_string(layer) + "): layer id out of range; the layout has " +
                       std::to_string(layout.num_layers()) + " layers (0.." + std::to_string(layout.num_layers() - 1) + ")");
  }

  /// Throws UsageError unless `elements` floats (in GPU memory when `on_device`) may be handed
  /// over as layer `layer`'s gradient.
  void check_gradient(std::size_t layer, std::size_t elements, bool on_device) const {
    check_layer(layer, "gradient_ready");
    const LayerSpec& spec = layout.layer(layer);
    if (elements != spec.elements)
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): span has " + std::to_string(elements) +
                       " elements but layer '" + spec.name + "' has " + std::to_string(spec.elements) + " in the ModelLayout");
    if (!on_device) return;
    if (const std::string why = device_refusal(layer); !why.empty())
      throw UsageError("gradsync: gradient_ready(" + std::to_string(layer) + "): layer '" + spec.name +
                       "' is in GPU memory, but " + why + "; or hand over a host copy");
  }

  /// Why layer `layer`'s gradient may not be handed over in GPU memory with these policies; empty
  /// when it may (Synchronizer::device_refusal).
  std::string device_refusal(std::size_t layer) const {
    constexpr bool device_codec = codec::DeviceCodec<Codec>;
    const auto& p = policies;
    const collective::Traits k = p.collective.traits();
    if (!k.device_memory && !(device_codec && k.through_codec))
      return "collective '" + collective_text() + "' reads units on the host: use " +
             (device_codec ? "'ring', 'ps', 'reduce-broadcast', 'hierarchical', 'hybrid' or 'nccl'"
                           : "'nccl' or 'nccl-hierarchical', or a device codec (cuda::OnDevice) with 'ring' or 'ps'");
    if (options.check_finite && !device_codec) return "Options::check_finite reads it on the host: set it to false";
    if (p.codec.traits().needs_residual)
      return "codec '" + std::string(p.codec.name()) + "' keeps its error-feedback residual on the host: use one "
             "without (fp32, fp16, bf16, qsgd)";
    for (const Unit& u : units)
      for (const Segment& s : u.segments)
        if (s.layer == layer && u.fused())
          return "slicing '" + p.slicing.describe() + "' fuses it with other layers on the host: use 'whole' or 'fixed'";
    return {};
  }

 private:
  /// Checks the policies fit together first.
  std::size_t bypass_threshold() const {
    collective::check_accepts(policies.collective, policies.codec);
    const codec::Traits c = policies.codec.traits();
    if (c.lossless) return 0;
    std::vector<std::size_t> sizes;
    for (const LayerSpec& l : layout.layers()) sizes.push_back(l.elements);
    return codec::bypass_threshold(sizes, c.bypass_below);
  }

  std::vector<std::size_t> lane_capacities() const {
    if (units.size() > transport::unit_tags_end) throw UsageError("gradsync: too many units; use larger slices");
    const std::size_t levels = policies.priority.levels(layout);
    std::vector<std::size_t> cap(levels, 0);
    for (std::uint32_t u = 0; u < units.size(); ++u) {
      const std::uint32_t k = policies.priority.key(units[u]);
      if (k >= levels)
        throw UsageError("gradsync: priority '" + std::string(policies.priority.name()) + "' gave key " +
                         std::to_string(k) + " but declared only " + std::to_string(levels) + " levels");
      ++cap[k];
    }
    return cap;
  }

  std::string describe_policies() const {
    return policies.slicing.describe() + "/" + gradsync::detail::describe_policy(policies.priority) + "/" +
           codec::describe(policies.codec) + "/" + collective_text();
  }

  HandshakeInfo handshake_info(int world) const {
    return {layout.signature(), world, static_cast<std::uint32_t>(layout.num_layers()),
            describe + "/" + (options.average ? "mean" : "sum") + "/inflight=" + std::to_string(options.inflight_units) +
                "/seed=" + std::to_string(options.seed)};
  }
};

}  // namespace gradsync::schedule
