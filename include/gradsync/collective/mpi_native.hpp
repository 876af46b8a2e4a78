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
/// MPI collectives carry no tag and must be issued in the same order on every rank. Units run on
/// several executor threads, so MpiNative issues them in Job::sequence order (the schedule order,
/// identical on every rank) and then lets them progress concurrently. Use one MpiNative object per
/// Synchronizer (copies share the issue order).
#include <condition_variable>
#include <memory>
#include <mutex>

#include "../transport/mpi.hpp"
#include "concept.hpp"

namespace gradsync::collective {

struct MpiNative {
  std::string_view name() const { return "mpi"; }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace&) const {
    if (!codec.lossless() || !codec.summable())
      throw UsageError("gradsync: collective 'mpi' (MPI_Iallreduce) sums fp32 values, so it works only with "
                       "lossless summable codecs (fp32), not '" + std::string(codec.name()) +
                       "'; use collective 'ring', 'reduce-broadcast', 'hierarchical' or 'hybrid'");
    auto* mpi = dynamic_cast<transport::Mpi*>(&t);
    if (!mpi)
      throw UsageError("gradsync: collective 'mpi' runs MPI's own all-reduce and needs transport::Mpi, not " +
                       t.describe() + "; use collective 'ring' with this transport");
    const int count = checked_count(job.data.size());
    MPI_Request req;
    issue_in_order(job, *mpi, [&] {
      const int rc = MPI_Iallreduce(MPI_IN_PLACE, job.data.data(), count, MPI_FLOAT, MPI_SUM,
                                    mpi->collective_comm(), &req);
      if (rc != MPI_SUCCESS)
        throw PeerError("gradsync: " + t.describe() + ": MPI_Iallreduce failed: " + transport::detail::mpi_error(rc));
    });
    mpi->wait(req, "MPI_Iallreduce", job.tag);
    detail::finish_mean(job.data, job.average, t.size());
    // What a ring all-reduce sends; MPI does not say what its algorithm sent.
    return job.data.size_bytes() * 2 * static_cast<std::size_t>(t.size() - 1) / static_cast<std::size_t>(t.size());
  }

 private:
  struct Order {
    std::mutex mutex;
    std::condition_variable turn;
    std::uint64_t next = 0;
  };
  std::shared_ptr<Order> order_ = std::make_shared<Order>();

  static int checked_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw UsageError("gradsync: collective 'mpi': unit too large for one MPI call; use smaller slices");
    return static_cast<int>(n);
  }
  /// Runs `issue` when every unit earlier in the schedule has been issued.
  template <class F>
  void issue_in_order(const Job& job, const transport::Mpi& mpi, F&& issue) const {
    if (!job.sequence) return issue();
    std::unique_lock lock(order_->mutex);
    if (!order_->turn.wait_for(lock, mpi.timeout(), [&] { return order_->next == *job.sequence; }))
      throw PeerError("gradsync: " + mpi.describe() + ": collective 'mpi' waited " +
                      std::to_string(mpi.timeout().count()) + " ms to issue unit " + std::to_string(job.tag) +
                      " (schedule position " + std::to_string(*job.sequence) + ", next to issue " +
                      std::to_string(order_->next) + "): an earlier unit never became ready on this rank");
    issue();
    ++order_->next;
    lock.unlock();
    order_->turn.notify_all();
  }
};
GRADSYNC_CHECK_COLLECTIVE(MpiNative);

}  // namespace gradsync::collective
