#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/onednn.hpp"

#include <algorithm>

// GCC 12's own AVX-512 headers warn -Wmaybe-uninitialized about _mm512_undefined_*() inside Eigen's
// kernels (GCC bug 105593, fixed in GCC 13): silenced for Eigen's code only, not for ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/ThreadPool>

#include <memory>

namespace gradsync::trainer::host {

// Threads split C into column (or row) slices, each an independent single-threaded product
// (oneDNN's sgemm: its AVX-512 kernels, 1.3-10x Eigen's AVX2 ones measured on the trainer's shapes):
// inside one multi-threaded product the threads busy-wait on each other, which collapses when the
// cores are shared with other work; here only the final join waits.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  const bool large = double(m) * double(n) * double(k) >= double(1 << 22);
  if (threads() <= 1 || !large) {
    onednn::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_columns = n >= m;
  const std::size_t total = by_columns ? n : m, parts = std::size_t(threads());
  for_each(parts, [&](std::size_t t) {
    const std::size_t lo = total * t / parts, len = total * (t + 1) / parts - lo;
    if (len == 0) return;
    if (by_columns)  // C[:, lo:lo+len] = op(A) op(B)[:, lo:lo+len]
      onednn::gemm(trans_a, trans_b, m, len, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    else  // C[lo:lo+len, :] = op(A)[lo:lo+len, :] op(B)
      onednn::gemm(trans_a, trans_b, len, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc,
                 ldc);
  }, std::size_t(1) << 21);
}

// Fixed chunks summed in a fixed order: the result does not depend on the thread count
// (an OpenMP reduction would combine partial sums in arrival order).
double sum_squares(const float* x, std::size_t n) {
  constexpr std::size_t chunks = 64;
  double part[chunks] = {};
  const std::size_t len = (n + chunks - 1) / chunks;
  for_each(chunks, [&](std::size_t c) {
    double s = 0.0;
    for (std::size_t i = c * len; i < std::min(n, (c + 1) * len); ++i) s += double(x[i]) * x[i];
    part[c] = s;
  }, len);
  double s = 0.0;
  for (double p : part) s += p;
  return s;
}

namespace {
// Each thread that calls set_threads(n > 1) owns n - 1 pool threads. Eigen's pool lets one idle
// member poll its queue 5000 / (n - 1) times (tens of microseconds) before it sleeps: waking a
// sleeping member cost ResNet-20 7% at 2 threads, and the short poll leaves shared cores to other
// work (OpenMP's long default spin ran two threads on a shared 2-core machine 3x slower than one).
struct Team {
  int size = 1;
  std::unique_ptr<Eigen::ThreadPool> pool;
  bool running = false;  // inside run_team: nested kernels run serially
};
thread_local Team team_of_this_thread;
}  // namespace

void set_threads(int threads) {
  Team& team = team_of_this_thread;
  threads = std::max(threads, 1);
  if (threads == team.size) return;
  team.pool = threads > 1 ? std::make_unique<Eigen::ThreadPool>(threads - 1, /*allow_spinning=*/true) : nullptr;
  team.size = threads;
}

int threads() {
  const Team& team = team_of_this_thread;
  return team.running ? 1 : team.size;
}

void run_team(void (*body)(const void*, std::size_t, std::size_t), const void* ctx) {
  Team& team = team_of_this_thread;
  const std::size_t size = std::size_t(threads());
  if (size == 1) return body(ctx, 0, 1);
  Eigen::Barrier done(unsigned(size - 1));
  team.running = true;
  for (std::size_t t = 1; t < size; ++t)
    team.pool->Schedule([&, t] {
      body(ctx, t, size);
      done.Notify();
    });
  body(ctx, 0, size);
  done.Wait();
  team.running = false;
}

}  // namespace gradsync::trainer::host
