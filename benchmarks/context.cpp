// Linked into every Google Benchmark program of benchmarks/ (benchmarks/CMakeLists.txt): adds to
// the context a results file records (--benchmark_out=FILE --benchmark_out_format=json) - next to
// Google Benchmark's own host name, CPU count, clock, caches and load - the CPU model, the memory,
// the commit the program was built from and whether the tree had changes then, the compiler and
// the build type, so that every results file names its machine and its source. It runs at
// start-up, before main, like the BENCHMARK registrations: the programs' mains need not know.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "build_info.hpp"  // generated at each build (build_info.cmake): GRADSYNC_BUILD_COMMIT, _TREE_CHANGED

namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (line.starts_with("model name") && colon != std::string::npos) return line.substr(colon + 2);
  }
  return "unknown";
}

std::string memory_gib() {
  const double bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / (1u << 30));
  return text;
}

// The keys are those of the sweeps' runs.jsonl (benchmarks/e2e/record.sh's record_machine).
const bool added = [] {
  benchmark::AddCustomContext("machine", cpu_model());
  benchmark::AddCustomContext("memory_gib", memory_gib());
  benchmark::AddCustomContext("commit", GRADSYNC_BUILD_COMMIT);
  benchmark::AddCustomContext("tree_changed", GRADSYNC_BUILD_TREE_CHANGED);
  benchmark::AddCustomContext("compiler", GRADSYNC_BUILD_COMPILER);
#ifdef GRADSYNC_BUILD_CUDA_COMPILER
  benchmark::AddCustomContext("cuda_compiler", GRADSYNC_BUILD_CUDA_COMPILER);
#endif
  benchmark::AddCustomContext("build_type", GRADSYNC_BUILD_TYPE);
  return true;
}();

}  // namespace
