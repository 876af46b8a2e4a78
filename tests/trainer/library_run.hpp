#pragma once
// Test helper: an in-process group and a SyncFactory that puts the library's Synchronizer
// (via the LibrarySync adapter) under each rank.
#include <gradsync/transport/in_process.hpp>

#include "gradsync/trainer/library_sync.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::test {

struct LibraryRun {
  // Ranks wait for rank 0 while it evaluates: generous timeouts for a loaded CI machine.
  static constexpr std::chrono::minutes patience{10};
  using Channel = std::function<std::unique_ptr<gradsync::transport::BestEffort>(gradsync::transport::Transport&)>;
  gradsync::transport::InProcessGroup group;
  gradsync::PolicyNames names;
  Channel best_effort;  ///< when set, collective 'dgt' sends its best-effort blocks through it
  explicit LibraryRun(int ranks, gradsync::PolicyNames policies) : group(ranks, patience), names(std::move(policies)) {}
  SyncFactory factory() {
    return [this](std::size_t r, const Model& model) -> std::unique_ptr<GradientSync> {
      gradsync::Options opt;
      opt.timeout = patience;
      if (!best_effort) return std::make_unique<LibrarySync>(group.rank(int(r)), model, names, opt);
      auto policies = gradsync::AnySynchronizer::parse(names);
      std::get<gradsync::collective::DifferentialPs>(policies.collective.policy).best_effort_channel = best_effort;
      return std::make_unique<SynchronizerHook<gradsync::AnySynchronizer>>(group.rank(int(r)), model, opt, policies);
    };
  }
};

}  // namespace gradsync::trainer::test
