#pragma once
// What the examples share, so that each one shows only its own idea:
//   check(condition, what)  the examples check their own results: a failed check throws (assert()
//                           would vanish from a Release build) and the program exits non-zero
//   on_ranks(n, fn)         fn(rank, transport) on n threads, one in-process rank each; rethrows
//                           the first rank's exception once all have ended
//   run(body)               main's body: returns 0, or prints the error and returns 1
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/transport/in_process.hpp>

namespace example {

inline void check(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed: " + what);
}

template <class F>
void on_ranks(int n, F fn) {
  gradsync::transport::InProcessGroup group(n);
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          fn(r, group.rank(r));
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
  }  // joins
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

template <class F>
int run(F body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace example
