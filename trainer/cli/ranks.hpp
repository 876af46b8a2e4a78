#pragma once
// gradsync-train's ranks and the transports between them: threads of this process over
// InProcess, or under mpirun this process alone over gradsync's MPI transport; emulated links
// (--bandwidth) that may change mid-run (--bandwidth-change); NCCL communicators for the NCCL
// collectives.
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include <gradsync/transport/in_process.hpp>
#include <gradsync/transport/throttled.hpp>
#if defined(GRADSYNC_WITH_MPI)
#include <gradsync/transport/mpi.hpp>
#endif
#if defined(GRADSYNC_WITH_NCCL)
#include <gradsync/transport/nccl.hpp>
#endif

#include "cli/options.hpp"

namespace gradsync::trainer::cli {

class Ranks {
 public:
  /// This process's ranks: options.train.ranks threads, or under mpirun (`under_mpi`) this
  /// process, which sets options.train's world, first_rank and progress (rank 0 alone shows it).
  Ranks(RunOptions& options, bool under_mpi);
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  /// --bandwidth: every rank's sends go through an emulated link; --bandwidth-change sets
  /// options.train.before_iteration to change them. Throws on a bad link or a change without links.
  void emulate_links(RunOptions& options);

  /// The transport of this process's rank `local` (0-based); called on that rank's thread, which
  /// NCCL's communicator needs (its construction is collective).
  gradsync::transport::Transport& transport(std::size_t local);

 private:
  gradsync::transport::InProcessGroup group_;
  std::vector<gradsync::transport::Transport*> transports_;  // this process's ranks, local index
#if defined(GRADSYNC_WITH_MPI)
  std::optional<gradsync::transport::Mpi> mpi_world_;
#endif
  std::vector<std::unique_ptr<gradsync::transport::Throttled<>>> links_;
#if defined(GRADSYNC_WITH_NCCL)
  // --collective nccl[-hierarchical]: NCCL's all-reduce needs a communicator per rank, on GPU 0
  // (CUDA_VISIBLE_DEVICES picks it), made over the rank's transport; the other collectives need none.
  bool nccl_collective_ = false;
  std::vector<std::unique_ptr<gradsync::transport::Nccl>> nccl_;
#endif
};

}  // namespace gradsync::trainer::cli
