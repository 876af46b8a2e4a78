#pragma once
// Test helper: a run interrupted and resumed, the way a preempted job is.
#include <string>

#include "gradsync/trainer/trainer.hpp"

namespace gradsync::trainer::test {

/// Runs `c` with `run` until it stops after `stop` iterations, checkpointed to `part`, then
/// resumes it from there and returns the resumed run's result. `c` is left as the resume's
/// configuration (checkpoint and resume `part`).
template <class Run>
TrainResult stop_and_resume(TrainConfig& c, const std::string& part, std::size_t stop, Run run) {
  c.checkpoint = part;
  c.stop_after = stop;
  run(c);
  c.stop_after = 0;
  c.resume = part;
  return run(c);
}

}  // namespace gradsync::trainer::test
