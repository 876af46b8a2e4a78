// gradsync-train: trains one of the trainer's models data-parallel over in-process ranks, or under
// mpirun one rank per process. With no arguments: the default on Fashion-MNIST (default_config()).
// A run, in the order of its pieces under cli/: the flags (options), the ranks and their transports
// (ranks), --tune (tuning), each rank's synchronizer (sync_factory), and what it prints and writes
// (report).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#if defined(GRADSYNC_WITH_MPI)
#include <gradsync/transport/mpi_session.hpp>
#endif

#include "cli/options.hpp"
#include "cli/ranks.hpp"
#include "cli/report.hpp"
#include "cli/sync_factory.hpp"
#include "cli/tuning.hpp"
#include "gradsync/trainer/retune.hpp"
#include "gradsync/trainer/trainer.hpp"

using namespace gradsync::trainer;
using namespace gradsync::trainer::cli;

namespace {

int run(RunOptions& o, bool under_mpi) {
  resolve_model(o);
  Ranks ranks(o, under_mpi);
  choose_default_tuning(o);
  print_banner(o);
  ranks.emulate_links(o);
  TrainConfig& c = o.train;
  Trace trace;
  if (!o.trace_path.empty()) c.trace = &trace;
  // --profile's, and --tune-steady's (which needs only its first iterations).
  LayerProfiler profiler(RetuningSync::steady_warmup, o.profile_path.empty() ? o.tune_steady : SIZE_MAX);
  if (!o.profile_path.empty() || (o.tune && o.tune_steady)) c.profiler = &profiler;
  Rank0Report rank0;
  const TrainResult result = train(c, make_sync_factory(o, ranks, rank0));
  if (!o.trace_path.empty())
    trace.write(c.first_rank == 0 ? o.trace_path : o.trace_path + ".rank" + std::to_string(c.first_rank));
  if (c.first_rank != 0) return 0;  // rank 0 of an MPI job reports
  if (!o.profile_path.empty()) profiler.write(o.profile_path, c.model.name);
  report(o, result, rank0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  RunOptions options;
  if (const auto exit_status = parse_command_line(argc, argv, options)) return *exit_status;
  bool under_mpi = false;
#if defined(GRADSYNC_WITH_MPI)
  // Under mpirun (or srun/PMI): one replica per process over gradsync's MPI transport.
  std::optional<gradsync::transport::MpiSession> mpi;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) mpi.emplace(argc, argv);
  under_mpi = mpi.has_value();
#endif
  try {
    return run(options, under_mpi);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ngradsync-train: error: %s\n", e.what());
#if defined(GRADSYNC_WITH_MPI)
    // Live peers fail within milliseconds of this rank (gradsync tells them) and finalize with it;
    // a dead peer would hold MPI_Finalize forever.
    if (mpi) mpi->finalize_within(std::chrono::seconds(2), 1);
#endif
    return 1;
  }
}
