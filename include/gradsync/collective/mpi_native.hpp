#pragma once
/// MpiNative: hands the unit to MPI's own all-reduce (MPI_Iallreduce, sum of floats) — the
/// vendor baseline. Only for lossless codecs whose sum is the sum of the floats (fp32): MPI adds
/// fp32 values, so a compressing codec cannot take part (use ring, hierarchical, ...). Only over
/// transport::Mpi (not InProcess, not Throttled: MPI moves the bytes itself).
///
/// \code
///   gradsync::transport::Mpi transport(MPI_COMM_WORLD);
///   gradsync::Synchronizer<..., gradsync::codec::Identity, gradsync::collective::MpiNative> sync{transport, layout};
///   // or AnyCollective::parse("mpi")
/// \endcode
///
/// MPI collectives carry no tag: MpiNative issues units in schedule order (issue_order.hpp) and
/// lets them progress concurrently. Use one MpiNative object per Synchronizer (copies share the
/// issue order).
#include <limits>

#include "../transport/mpi.hpp"
#include "concept.hpp"
#include "issue_order.hpp"

namespace gradsync::collective {

struct MpiNative {
  std::string_view name() const { return "mpi"; }
  /// The vendor library adds fp32 values.
  static constexpr Traits traits() { return {.needs_lossless_codec = true}; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace&) const {
    check_accepts(*this, codec);
    auto* mpi = t.native<transport::Mpi>();
    if (!mpi)
      throw UsageError("gradsync: collective 'mpi' runs MPI's own all-reduce and needs transport::Mpi, not " +
                       t.describe() + "; use collective 'ring' with this transport");
    const int count = checked_count(job.data.size());
    MPI_Request req;
    order_.run(job, t, "mpi", [&] {
      const int rc = MPI_Iallreduce(MPI_IN_PLACE, job.data.data(), count, MPI_FLOAT, MPI_SUM,
                                    mpi->collective_comm(), &req);
      if (rc != MPI_SUCCESS)
        throw PeerError("gradsync: " + t.describe() + ": MPI_Iallreduce failed: " + transport::detail::mpi_error(rc));
    });
    mpi->wait(req, "MPI_Iallreduce", job.tag);
    detail::finish_mean(job.data, job.average, t.size());
    // What a ring all-reduce sends; MPI does not say what its algorithm sent.
    return detail::ring_bytes(job.data.size_bytes(), t.size());
  }

 private:
  detail::IssueOrder order_;

  static int checked_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw UsageError("gradsync: collective 'mpi': unit too large for one MPI call; use smaller slices");
    return static_cast<int>(n);
  }
};
GRADSYNC_CHECK_COLLECTIVE(MpiNative);

}  // namespace gradsync::collective
