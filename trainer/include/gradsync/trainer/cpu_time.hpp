#pragma once
// process_cpu_seconds(): the CPU time of this process, all its threads (the per-iteration CPU of
// the metrics, and --tune-steady's measure of the cores a rank gets).
#include <time.h>

namespace gradsync::trainer {

inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

}  // namespace gradsync::trainer
