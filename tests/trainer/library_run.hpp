#pragma once
// Test helper: an in-process group and a SyncFactory that puts the library's Synchronizer
// (via the LibrarySync adapter) under each rank.
#include "gradsync/trainer/library_sync.hpp"
#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::test {

struct LibraryRun {
  // Ranks wait for rank 0 while it evaluates: generous timeouts for a loaded CI machine.
  static constexpr std::chrono::minutes patience{10};
  gradsync::transport::InProcessGroup group;
  gradsync::PolicyNames names;
  explicit LibraryRun(int ranks, gradsync::PolicyNames policies) : group(ranks, patience), names(std::move(policies)) {}
  SyncFactory factory() {
    return [this](std::size_t r, const Model& model) -> std::unique_ptr<GradientSync> {
      gradsync::Options opt;
      opt.timeout = patience;
      return std::make_unique<LibrarySync>(group.rank(int(r)), model, names, opt);
    };
  }
};

}  // namespace gradsync::trainer::test
