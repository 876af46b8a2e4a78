#pragma once
/// gradsync: gradient synchronization for data-parallel training. Include this one header.
///
/// \code
///   #include <gradsync/gradsync.hpp>
///   namespace gs = gradsync;
///   gs::transport::InProcessGroup group(4);                 // or transport::Mpi (link gradsync::mpi)
///   gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                    gs::codec::Identity, gs::collective::Ring> sync{group.rank(r), layout};
///   // or, chosen from strings at run time:
///   gs::AnySynchronizer any{group.rank(r), layout, {.slicing = "fixed:40000", .collective = "ps"}};
/// \endcode
#include <string>

#include "codec/any.hpp"
#include "collective/any.hpp"
#include "priority/any.hpp"
#include "slicing/any.hpp"
#include "synchronizer.hpp"
#include "transport/in_process.hpp"
#include "transport/throttled.hpp"
#if defined(GRADSYNC_WITH_MPI)  // set by the gradsync::mpi CMake target
#include "transport/mpi.hpp"
#endif

namespace gradsync {

/// Policy names for AnySynchronizer; see each Any... policy for the accepted strings.
struct PolicyNames {
  std::string slicing = "fixed:40000";
  std::string priority = "forward";
  std::string codec = "fp32";
  std::string collective = "ring";
};

/// A Synchronizer whose policies are chosen from strings (one instantiation for a whole CLI).
/// Unknown or malformed names throw ConfigError listing the valid ones.
class AnySynchronizer
    : public Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective> {
  using Base = Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;

 public:
  AnySynchronizer(transport::Transport& t, ModelLayout layout, const PolicyNames& names = {}, Options options = {})
      : Base(t, std::move(layout), std::move(options), slicing::AnySlicing::parse(names.slicing),
             priority::AnyPriority::parse(names.priority), codec::AnyCodec::parse(names.codec),
             collective::AnyCollective::parse(names.collective)) {}
};

}  // namespace gradsync
