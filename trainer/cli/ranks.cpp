#include "cli/ranks.hpp"

#include <gradsync/core/error.hpp>

namespace gradsync::trainer::cli {

Ranks::Ranks(RunOptions& options, [[maybe_unused]] bool under_mpi)
    : group_(int(options.train.ranks), options.patience()) {
  TrainConfig& c = options.train;
  for (int r = 0; r < int(c.ranks); ++r) transports_.push_back(&group_.rank(r));
#if defined(GRADSYNC_WITH_MPI)
  if (under_mpi) {
    mpi_world_.emplace(MPI_COMM_WORLD, options.patience());
    if (options.was_given("--ranks")) throw gradsync::ConfigError("--ranks is for in-process ranks; under mpirun use -np");
    c.ranks = 1;
    c.world = std::size_t(mpi_world_->size());
    c.first_rank = std::size_t(mpi_world_->rank());
    c.progress = c.progress && c.first_rank == 0;
    transports_ = {&*mpi_world_};
  }
#endif
#if defined(GRADSYNC_WITH_NCCL)
  nccl_collective_ = options.policies.collective.starts_with("nccl");
  nccl_.resize(transports_.size());
#endif
}

void Ranks::emulate_links(RunOptions& options) {
  if (!options.bandwidth.empty()) {
    const auto link = gradsync::transport::Link::parse(options.bandwidth);
    for (auto*& t : transports_) t = links_.emplace_back(std::make_unique<gradsync::transport::Throttled<>>(*t, link)).get();
  }
  if (!options.was_given("--bandwidth-change")) return;
  if (links_.empty()) throw gradsync::ConfigError("--bandwidth-change changes the emulated links: add --bandwidth");
  const auto to = gradsync::transport::Link::parse(options.bandwidth_change.second);
  options.train.before_iteration = [links = &links_, to, from = options.bandwidth_change.first,
                                    first = options.train.first_rank](std::size_t r, std::size_t it) {
    if (it == from) links->at(r - first)->change(to);  // each rank its own sends
  };
}

gradsync::transport::Transport& Ranks::transport(std::size_t local) {
#if defined(GRADSYNC_WITH_NCCL)
  if (nccl_collective_) return *(nccl_.at(local) = std::make_unique<gradsync::transport::Nccl>(*transports_.at(local), 0));
#endif
  return *transports_.at(local);
}

}  // namespace gradsync::trainer::cli
