#pragma once
/// AnyCollective: a collective chosen at run time from a string.
///
///   "ring"                 Ring
///   "ps"                   ParameterServer
///   "dgt[:alpha=A][:p0=P][:block=N]"  DifferentialPs (DGT: unimportant blocks best-effort; fp32)
///   "reduce-broadcast"     ReduceBroadcast
///   "hierarchical[:k]"     Hierarchical with groups of k ranks (default: automatic)
///   "hybrid[:bytes[:k]]"   Hybrid: hierarchical below `bytes` (e.g. 256KiB), ring above
///   "mpi"                  MpiNative (only when built with MPI: GRADSYNC_WITH_MPI, target gradsync::mpi)
///   "gloo[:iface]"         GlooNative on that network interface (only when built with Gloo:
///                          GRADSYNC_WITH_GLOO, target gradsync::gloo)
///   "nccl"                 NcclNative (only when built with NCCL: GRADSYNC_WITH_NCCL, target gradsync::nccl)
///   "nccl-hierarchical[:k]" NcclHierarchical: NCCL inside groups of k, the ring between them (NCCL too)
///
/// A runtime codec (codec::AnyCodec) is resolved to its concrete type before the collective runs,
/// so collectives keep their per-codec fast paths (raw fp32) when chosen from strings.
#include <cassert>
#include <typeinfo>
#include <variant>

#include "../codec/any.hpp"
#include "../detail/parse.hpp"
#include "differential_ps.hpp"
#include "hierarchical.hpp"
#include "hybrid.hpp"
#include "parameter_server.hpp"
#include "reduce_broadcast.hpp"
#include "ring.hpp"
#include "spec.hpp"
#if defined(GRADSYNC_WITH_MPI)
#include "mpi_native.hpp"
#endif
#if defined(GRADSYNC_WITH_GLOO)
#include "gloo_native.hpp"
#endif
#if defined(GRADSYNC_WITH_NCCL)
#include "nccl_hierarchical.hpp"
#include "nccl_native.hpp"
#endif

namespace gradsync::collective {

struct AnyCollective {
  /// The optional backends compiled in ("mpi,gloo"): they change the variant below, so code built
  /// with one set must not link an instantiation built with another (any_synchronizer.hpp checks).
  static constexpr std::string_view backends = ""
#if defined(GRADSYNC_WITH_MPI)
                                               "mpi,"
#endif
#if defined(GRADSYNC_WITH_GLOO)
                                               "gloo,"
#endif
#if defined(GRADSYNC_WITH_NCCL)
                                               "nccl,"
#endif
      ;

  std::variant<Ring, ParameterServer, ReduceBroadcast, Hierarchical, Hybrid, DifferentialPs
#if defined(GRADSYNC_WITH_MPI)
               ,
               MpiNative
#endif
#if defined(GRADSYNC_WITH_GLOO)
               ,
               GlooNative
#endif
#if defined(GRADSYNC_WITH_NCCL)
               ,
               NcclNative, NcclHierarchical
#endif
               >
      policy;

  /// The policy strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar = Spec::grammar;

  static AnyCollective parse(std::string_view text) {
    using K = Spec::Kind;
    const Spec s = Spec::parse(text);
    switch (s.kind) {
      case K::ring: return {Ring{}};
      case K::ps: return {ParameterServer{}};
      case K::reduce_broadcast: return {ReduceBroadcast{}};
      case K::hierarchical: return {Hierarchical{.group = s.group}};
      case K::dgt: return {DifferentialPs::parse(text)};
      case K::hybrid: {
        Hybrid h;
        if (s.threshold_bytes) h.threshold_bytes = *s.threshold_bytes;
        h.small.group = s.group;
        return {h};
      }
      case K::mpi:
#if defined(GRADSYNC_WITH_MPI)
        return {MpiNative{}};
#else
        throw ConfigError("gradsync: collective 'mpi' needs gradsync built with MPI: link the gradsync::mpi target "
                          "(or define GRADSYNC_WITH_MPI and link MPI); otherwise use 'ring'");
#endif
      case K::gloo:
#if defined(GRADSYNC_WITH_GLOO)
        return {GlooNative(s.iface)};
#else
        throw ConfigError("gradsync: collective 'gloo' needs gradsync built with Gloo: install libgloo-dev (Debian) "
                          "and link the gradsync::gloo target (gradsync.torch built for a PyTorch wheel leaves it "
                          "out: the wheel's own Gloo would take its symbols); otherwise use 'ring'");
#endif
      case K::nccl:
#if defined(GRADSYNC_WITH_NCCL)
        return {NcclNative{}};
#else
        throw ConfigError("gradsync: collective 'nccl' needs gradsync built with NCCL: link the gradsync::nccl target "
                          "(CUDA and NCCL found at configure time) and use transport::Nccl; otherwise use 'ring'");
#endif
      case K::nccl_hierarchical:
#if defined(GRADSYNC_WITH_NCCL)
        return {NcclHierarchical(s.group)};
#else
        throw ConfigError("gradsync: collective 'nccl-hierarchical' needs gradsync built with NCCL: link the "
                          "gradsync::nccl target and use transport::Nccl; otherwise use 'hierarchical'");
#endif
    }
    gradsync::detail::bad_policy("collective", text, grammar);  // not reached: every kind returns
  }
  std::string_view name() const {
    return std::visit([](const auto& p) { return p.name(); }, policy);
  }
  /// The name with the knobs ("hierarchical:2"); the Synchronizer's handshake compares it.
  std::string describe() const {
    return std::visit([](const auto& p) { return gradsync::detail::describe_policy(p); }, policy);
  }
  /// The chosen collective's traits.
  Traits traits() const {
    return std::visit([](const auto& p) { return p.traits(); }, policy);
  }
  /// The chosen collective's State (a plain Runtime for one that keeps none).
  using State = Runtime;
  std::unique_ptr<State> start(const Setup& setup) const {
    return std::visit([&](const auto& p) -> std::unique_ptr<State> { return collective::start(p, setup); }, policy);
  }
  /// Runs a unit with what this collective's start() returned (its precondition: the state's type
  /// is the chosen collective's, so it is passed on as that type).
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& c, Job& job, Workspace& ws, State& state) const {
    if constexpr (std::same_as<C, codec::AnyCodec>)  // a runtime codec: dispatch on its concrete type too
      return std::visit([&](const auto& concrete) { return run(t, concrete, job, ws, state); }, c.variant());
    else
      return std::visit([&]<class P>(const P& p) {
        assert(typeid(state) == typeid(state_t<P>) && "a state another collective's start() made");
        return collective::run(p, t, c, job, ws, static_cast<state_t<P>&>(state));
      }, policy);
  }
  /// Runs a unit without a state, for collectives that can (every one but 'gloo' and 'dgt').
  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& c, Job& job, Workspace& ws) const {
    if constexpr (std::same_as<C, codec::AnyCodec>)
      return std::visit([&](const auto& concrete) { return run(t, concrete, job, ws); }, c.variant());
    else
      return std::visit([&](const auto& p) -> std::size_t {
        if constexpr (requires { p.run(t, c, job, ws); }) return p.run(t, c, job, ws);
        else
          throw UsageError("gradsync: collective '" + std::string(p.name()) + "' runs a unit with the state its "
                           "start() made (a Synchronizer starts it), not on its own");
      }, policy);
  }

};
GRADSYNC_CHECK_COLLECTIVE(AnyCollective);

}  // namespace gradsync::collective
