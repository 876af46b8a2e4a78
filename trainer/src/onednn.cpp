// oneDNN's runtime setting and its sgemm (onednn.hpp).
#include "gradsync/trainer/onednn.hpp"

#include <omp.h>

#include <gradsync/core/error.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace gradsync::trainer::onednn {

void single_threaded() {
  thread_local const bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  single_threaded();
  using dim = dnnl_dim_t;
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', dim(m), dim(n), dim(k), alpha, a,
                                          dim(lda), b, dim(ldb), beta, c, dim(ldc));
  if (status != dnnl_success)
    throw UsageError("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                     ": oneDNN's sgemm refused the arguments (status " + std::to_string(int(status)) + ")");
}

}  // namespace gradsync::trainer::onednn
