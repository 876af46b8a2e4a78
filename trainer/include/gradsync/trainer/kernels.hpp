#pragma once
// Elementwise and per-channel kernels as functors (see backend.hpp): plain data members (pointers
// and sizes) and a GRADSYNC_HD call operator, so the same body runs on the host or a device.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "gradsync/trainer/backend.hpp"
#if !defined(__CUDACC__)
#include "gradsync/trainer/host_math.hpp"
#endif

namespace gradsync::trainer::kernels {

struct Fill {
  float* y; float v;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = v; }
};
struct ReluForward {
  const float* x; float* y;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
};
/// Uses the output (y > 0 iff x > 0), so the input need not be kept.
struct ReluBackward {
  const float* y; const float* dy; float* dx;
  GRADSYNC_HD void operator()(std::size_t i) const {
    const float d = dy[i];  // loaded unconditionally: a select, which vectorizes, not a branch
    dx[i] = y[i] > 0.0f ? d : 0.0f;
  }
};
struct Add {
  const float* a; const float* b; float* y;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = a[i] + b[i]; }
};
struct AddRelu {
  const float* a; const float* b; float* y;
  GRADSYNC_HD void operator()(std::size_t i) const { float v = a[i] + b[i]; y[i] = v > 0.0f ? v : 0.0f; }
};
struct Accumulate {
  const float* x; float* y;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] += x[i]; }
};

/// splitmix64: a counter-based hash; uniform in [0, 1) from (key, counter).
GRADSYNC_HD inline float hash_uniform(std::uint64_t key, std::uint64_t counter) {
  std::uint64_t z = key + 0x9E3779B97F4A7C15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}
/// Seeded initialisation: y[i] uniform in [-scale, scale) from (key, i).
struct InitUniform {
  float* y; std::uint64_t key; float scale;
  GRADSYNC_HD void operator()(std::size_t i) const { y[i] = scale * (2.0f * hash_uniform(key, i) - 1.0f); }
};
/// Normal with standard deviation `scale`: Box-Muller on two hashed uniforms.
struct InitNormal {
  float* y; std::uint64_t key; float scale;
  GRADSYNC_HD void operator()(std::size_t i) const {
    const float u1 = 1.0f - hash_uniform(key, 2 * i), u2 = hash_uniform(key, 2 * i + 1);
    y[i] = scale * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }
};
/// Dropout in both directions: y = x * keep / (1 - p), keep = hash >= p.
struct DropoutApply {
  const float* x; float* y; std::uint64_t key; float p; float scale;
  GRADSYNC_HD void operator()(std::size_t i) const {
    const float v = x[i] * scale;
    y[i] = hash_uniform(key, i) >= p ? v : 0.0f;
  }
};

// Per-channel sums of [N, C, S] tensors in two steps, so that both backends have N * C
// independent planes to sum (a GPU thread per channel would walk N * S values alone): each
// (image, channel) plane, then each channel's planes over the images.

/// x[j] as a function of j (detail::lane_sum's terms).
struct Values {
  const float* x;
  GRADSYNC_HD float operator()(std::size_t j) const { return x[j]; }
};
/// Terms of per-plane sums of x [planes, S]; (row, j) = (plane, position).
struct PlaneSum {
  const float* x; std::size_t s;
  GRADSYNC_HD float operator()(std::size_t plane, std::size_t j) const { return x[plane * s + j]; }
};
/// Batch norm's statistics, one (image, channel) plane of x [N*C planes, S] per index: its sum and
/// its squared deviations from its own mean, the second pass over a plane still in cache (a device
/// runs a thread per plane); ChannelMoments combines them per channel.
struct PlaneMoments {
  const float* x; float* sum; float* m2; std::size_t s;
  struct Deviation {
    const float* x; float mean;
    GRADSYNC_HD float operator()(std::size_t j) const {
      const float d = x[j] - mean;
      return d * d;
    }
  };
  GRADSYNC_HD void operator()(std::size_t plane) const {
    const float* p = x + plane * s;
    const double total = detail::lane_sum(Values{p}, s);
    sum[plane] = float(total);
    m2[plane] = float(detail::lane_sum(Deviation{p, float(total / double(s))}, s));
  }
};
/// Channel ch's batch mean and biased variance from its N planes' moments (PlaneMoments), combined
/// as Chan, Golub and LeVeque's pairwise update does: M2 = sum of the planes' M2 + S * (plane mean -
/// mean)^2. Numerically as good as two passes over the whole channel.
struct ChannelMoments {
  const float* sum; const float* m2; float* mean; float* var; std::size_t n, c, s;
  GRADSYNC_HD void operator()(std::size_t ch) const {
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) total += sum[i * c + ch];
    const double m = total / double(n * s);
    double sq = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double d = double(sum[i * c + ch]) / double(s) - m;
      sq += double(m2[i * c + ch]) + double(s) * d * d;
    }
    mean[ch] = float(m);
    var[ch] = float(sq / double(n * s));
  }
};
/// Batch norm's backward sums, one plane of dy and xhat [N*C planes, S] per index: sum(dy * xhat)
/// and sum(dy), the second pass over a plane of dy still in cache.
struct PlaneDotAndSum {
  const float* dy; const float* xhat; float* dot; float* sum; std::size_t s;
  struct Product {
    const float* a; const float* b;
    GRADSYNC_HD float operator()(std::size_t j) const { return a[j] * b[j]; }
  };
  GRADSYNC_HD void operator()(std::size_t plane) const {
    const float* d = dy + plane * s;
    dot[plane] = float(detail::lane_sum(Product{d, xhat + plane * s}, s));
    sum[plane] = float(detail::lane_sum(Values{d}, s));
  }
};
/// Terms of per-channel sums of per-plane partials [N, C]; (row, j) = (channel, image).
struct ChannelPartial {
  const float* partial; std::size_t c;
  GRADSYNC_HD float operator()(std::size_t ch, std::size_t image) const { return partial[image * c + ch]; }
};

/// xhat = (x - mean) * inv_std; y = gamma * xhat + beta; (row, j) = ((image, channel) plane, position).
struct BnNormalize {
  const float* x; const float* mean; const float* inv_std; const float* gamma; const float* beta;
  float* xhat; float* y; std::size_t c, s;
  struct Row {
    const float* x; float* xhat; float* y; float mean, inv_std, gamma, beta;
    GRADSYNC_HD void operator()(std::size_t j) const {
      const float h = (x[j] - mean) * inv_std;
      if (xhat) xhat[j] = h;
      y[j] = gamma * h + beta;
    }
  };
  GRADSYNC_HD Row row(std::size_t plane) const {
    const std::size_t ch = plane % c, at = plane * s;
    return {x + at, xhat ? xhat + at : nullptr, y + at, mean[ch], inv_std[ch], gamma[ch], beta[ch]};
  }
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const { row(plane)(j); }
};
/// Running statistics from the batch's; unbiased variance, as PyTorch. i = channel.
struct BnRunningUpdate {
  const float* mean; const float* inv_std; float* running_mean; float* running_var; float momentum, eps, unbias;
  GRADSYNC_HD void operator()(std::size_t ch) const {
    const float var = 1.0f / (inv_std[ch] * inv_std[ch]) - eps;
    running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean[ch];
    running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * var * unbias;
  }
};
/// inv_std from a variance (eval mode: the running one; training: the batch's). i = channel.
struct BnEvalInvStd {
  const float* running_var; float* inv_std; float eps;
  GRADSYNC_HD void operator()(std::size_t ch) const { inv_std[ch] = 1.0f / std::sqrt(running_var[ch] + eps); }
};
/// dx = gamma * inv_std / M * (M dy - dbeta - xhat dgamma), M = n * s; (row, j) = (plane, position).
struct BnInputGrad {
  const float* dy; const float* xhat; const float* gamma; const float* inv_std; const float* dgamma;
  const float* dbeta; float* dx; std::size_t c, s; float inv_m;
  struct Row {
    const float* dy; const float* xhat; float* dx; float k, m, dbeta, dgamma;
    GRADSYNC_HD void operator()(std::size_t j) const { dx[j] = k * (m * dy[j] - dbeta - xhat[j] * dgamma); }
  };
  GRADSYNC_HD Row row(std::size_t plane) const {
    const std::size_t ch = plane % c, at = plane * s;
    return {dy + at, xhat + at, dx + at, gamma[ch] * inv_std[ch] * inv_m, 1.0f / inv_m, dbeta[ch], dgamma[ch]};
  }
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const { row(plane)(j); }
};

/// Output positions o in [0, n) whose input coordinate o * stride + k - pad lies in [0, size):
/// [lo, hi). Lets im2col/col2im run their inner loops without per-element bounds checks.
GRADSYNC_HD inline void valid_range(std::size_t n, std::size_t size, std::size_t k, std::size_t stride, std::size_t pad,
                                    std::size_t& lo, std::size_t& hi) {
  lo = k >= pad ? 0 : (pad - k + stride - 1) / stride;
  const long last = long(size) - 1 + long(pad) - long(k);  // o * stride <= last
  hi = last < 0 ? 0 : std::size_t(last) / stride + 1;
  if (hi > n) hi = n;
  if (lo > hi) lo = hi;
}

/// Input position (iy, ix) = (o * stride + k - pad) of output position o, or -1 in the padding.
GRADSYNC_HD inline long tap(std::size_t o, std::size_t k, std::size_t stride, std::size_t pad, std::size_t size) {
  const long v = long(o * stride + k) - long(pad);
  return v >= 0 && v < long(size) ? v : -1;
}

/// im2col of a chunk of images [nb, c, h, w] into a column matrix with ld columns (images side by
/// side): row = (image i, r), r = (ci, ky, kx) the matrix row, filling columns [i*oh*ow, +oh*ow).
/// The row form (host) runs bounds-free inner loops; the element form (device, j = output
/// position) writes the same values one per thread.
struct Im2col {
  const float* x; float* col; std::size_t c, h, w, k, stride, pad, oh, ow, ld;
  GRADSYNC_HD void operator()(std::size_t row) const {
    const std::size_t i = row / (c * k * k), r = row % (c * k * k);
    const std::size_t ci = r / (k * k), ky = (r / k) % k, kx = r % k;
    const float* plane = x + (i * c + ci) * h * w;
    float* out = col + r * ld + i * oh * ow;
    std::size_t ylo, yhi, xlo, xhi;
    valid_range(oh, h, ky, stride, pad, ylo, yhi);
    valid_range(ow, w, kx, stride, pad, xlo, xhi);
    for (std::size_t oy = 0; oy < oh; ++oy) {
      float* row = out + oy * ow;
      if (oy < ylo || oy >= yhi) { for (std::size_t ox = 0; ox < ow; ++ox) row[ox] = 0.0f; continue; }
      // Offset of input (iy, ix) for ox = 0 (may be negative: only ox in [xlo, xhi) are read).
      const long base = long(oy * stride + ky - pad) * long(w) + long(kx) - long(pad);
      for (std::size_t ox = 0; ox < xlo; ++ox) row[ox] = 0.0f;
      if (stride == 1) for (std::size_t ox = xlo; ox < xhi; ++ox) row[ox] = plane[base + long(ox)];
      else for (std::size_t ox = xlo; ox < xhi; ++ox) row[ox] = plane[base + long(ox * stride)];
      for (std::size_t ox = xhi; ox < ow; ++ox) row[ox] = 0.0f;
    }
  }
  GRADSYNC_HD void operator()(std::size_t row, std::size_t j) const {
    const std::size_t i = row / (c * k * k), r = row % (c * k * k);
    const std::size_t ci = r / (k * k), ky = (r / k) % k, kx = r % k;
    const long iy = tap(j / ow, ky, stride, pad, h), ix = tap(j % ow, kx, stride, pad, w);
    col[r * ld + i * oh * ow + j] = iy >= 0 && ix >= 0 ? x[(i * c + ci) * h * w + std::size_t(iy) * w + std::size_t(ix)] : 0.0f;
  }
};
/// col2im of a chunk of images, the inverse of Im2col: row = (image i, input channel ci), whose
/// plane sums its own k * k matrix rows (no races). The row form (host) scatters rows into the
/// plane; the element form (device, j = input position) gathers the same terms in the same
/// (ky, kx) order, so both give the same bits.
struct Col2im {
  const float* col; float* x; std::size_t c, h, w, k, stride, pad, oh, ow, ld;
  GRADSYNC_HD void operator()(std::size_t row) const {
    const std::size_t i = row / c, ci = row % c;
    float* plane = x + row * h * w;
    for (std::size_t j = 0; j < h * w; ++j) plane[j] = 0.0f;
    for (std::size_t ky = 0; ky < k; ++ky) {
      std::size_t ylo, yhi;
      valid_range(oh, h, ky, stride, pad, ylo, yhi);
      for (std::size_t kx = 0; kx < k; ++kx) {
        std::size_t xlo, xhi;
        valid_range(ow, w, kx, stride, pad, xlo, xhi);
        const float* src = col + ((ci * k + ky) * k + kx) * ld + i * oh * ow;
        for (std::size_t oy = ylo; oy < yhi; ++oy) {
          const long base = long(oy * stride + ky - pad) * long(w) + long(kx) - long(pad);
          const float* row = src + oy * ow;
          if (stride == 1) for (std::size_t ox = xlo; ox < xhi; ++ox) plane[base + long(ox)] += row[ox];
          else for (std::size_t ox = xlo; ox < xhi; ++ox) plane[base + long(ox * stride)] += row[ox];
        }
      }
    }
  }
  GRADSYNC_HD void operator()(std::size_t row, std::size_t j) const {
    const std::size_t i = row / c, ci = row % c, y = j / w, xx = j % w;
    float acc = 0.0f;
    for (std::size_t ky = 0; ky < k; ++ky) {
      const long ty = long(y + pad) - long(ky);  // = oy * stride for the output row that reads y
      if (ty < 0 || ty % long(stride) != 0 || std::size_t(ty) / stride >= oh) continue;
      for (std::size_t kx = 0; kx < k; ++kx) {
        const long tx = long(xx + pad) - long(kx);
        if (tx < 0 || tx % long(stride) != 0 || std::size_t(tx) / stride >= ow) continue;
        acc += col[((ci * k + ky) * k + kx) * ld + i * oh * ow + std::size_t(ty) / stride * ow + std::size_t(tx) / stride];
      }
    }
    x[row * h * w + j] = acc;
  }
};

// Stride-1 convolution in "padded-width" form, one image at a time. The image is zero-padded to
// planes of hp x wp (wp = w + 2 pad) and the output is computed at oh x wp positions, of which
// the last k - 1 of each row are junk. Then the column-matrix row (ci, ky, kx) is the padded
// plane shifted by ky * wp + kx: one contiguous copy of oh * wp floats instead of oh short runs
// with bounds, and col2im is k * k contiguous adds. Planes are hp * wp + k - 1 floats: the slack
// (zeros) covers the last shifted row's overrun.

/// x [C, h, w] -> padded planes; i = channel.
struct PadImage {
  const float* x; float* xp; std::size_t h, w, pad, plane;
  GRADSYNC_HD void operator()(std::size_t ci) const {
    const std::size_t wp = w + 2 * pad;
    float* out = xp + ci * plane;
    const float* in = x + ci * h * w;
    for (std::size_t j = 0; j < plane; ++j) out[j] = 0.0f;
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t j = 0; j < w; ++j) out[(y + pad) * wp + pad + j] = in[y * w + j];
  }
};
/// Column-matrix row r = (ci, ky, kx), oh * wp columns; i = r.
struct ShiftedIm2col {
  const float* xp; float* col; std::size_t k, wp, plane, positions;
  GRADSYNC_HD void operator()(std::size_t r) const {
    const std::size_t ci = r / (k * k), ky = (r / k) % k, kx = r % k;
    const float* in = xp + ci * plane + ky * wp + kx;
    float* out = col + r * positions;
    for (std::size_t j = 0; j < positions; ++j) out[j] = in[j];
  }
};
/// Padded-width output [C, oh, wp] -> NCHW [C, oh, ow], plus bias; i = channel.
struct CropColumns {
  const float* yp; const float* bias; float* y; std::size_t oh, ow, wp;
  GRADSYNC_HD void operator()(std::size_t ch) const {
    const float b = bias ? bias[ch] : 0.0f;
    for (std::size_t oy = 0; oy < oh; ++oy)
      for (std::size_t ox = 0; ox < ow; ++ox) y[(ch * oh + oy) * ow + ox] = yp[(ch * oh + oy) * wp + ox] + b;
  }
};
/// The inverse: dy [C, oh, ow] -> [C, oh, wp] with zeros in the junk columns (so they add nothing
/// to the weight gradient); i = channel.
struct WidenColumns {
  const float* dy; float* dyp; std::size_t oh, ow, wp;
  GRADSYNC_HD void operator()(std::size_t ch) const {
    for (std::size_t oy = 0; oy < oh; ++oy)
      for (std::size_t ox = 0; ox < wp; ++ox)
        dyp[(ch * oh + oy) * wp + ox] = ox < ow ? dy[(ch * oh + oy) * ow + ox] : 0.0f;
  }
};
/// col2im of the shifted rows: sums channel ci's k * k rows into its padded plane (scratch), then
/// crops the padding into dx [C, h, w]; i = channel.
struct ShiftedCol2im {
  const float* col; float* scratch; float* dx; std::size_t h, w, k, pad, plane, positions;
  GRADSYNC_HD void operator()(std::size_t ci) const {
    const std::size_t wp = w + 2 * pad;
    float* acc = scratch + ci * plane;
    for (std::size_t j = 0; j < plane; ++j) acc[j] = 0.0f;
    for (std::size_t kk = 0; kk < k * k; ++kk) {
      const float* row = col + (ci * k * k + kk) * positions;
      float* out = acc + (kk / k) * wp + kk % k;
      for (std::size_t j = 0; j < positions; ++j) out[j] += row[j];
    }
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t j = 0; j < w; ++j) dx[(ci * h + y) * w + j] = acc[(y + pad) * wp + pad + j];
  }
};

/// SGD with momentum on one tensor (PyTorch form): v = mu v + (g + wd w); w -= lr v.
/// `local` scales the step (LARS trust ratio; 1 for plain SGD).
struct SgdUpdate {
  float* w; const float* g; float* v; float lr, mu, wd, local;
  GRADSYNC_HD void operator()(std::size_t i) const {
    v[i] = mu * v[i] + local * (g[i] + wd * w[i]);
    w[i] -= lr * v[i];
  }
};

/// Column-matrix chunk [C, nb*S] (image-major columns) -> NCHW images [nb, C, S], plus bias;
/// (row, j) = ((image, channel) plane, position).
struct ChunkToNchw {
  const float* chunk; const float* bias; float* y; std::size_t c, s, nb;
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const {
    const std::size_t img = plane / c, ch = plane % c;
    y[plane * s + j] = chunk[(ch * nb + img) * s + j] + (bias ? bias[ch] : 0.0f);
  }
};
/// The inverse gather: NCHW [nb, C, S] -> chunk [C, nb*S].
struct NchwToChunk {
  const float* y; float* chunk; std::size_t c, s, nb;
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const {
    const std::size_t img = plane / c, ch = plane % c;
    chunk[(ch * nb + img) * s + j] = y[plane * s + j];
  }
};
/// Column sums of a row-major [m, n] matrix (Linear bias gradient); i = column.
struct ColumnSum {
  const float* x; float* out; std::size_t m, n;
  GRADSYNC_HD void operator()(std::size_t j) const {
    double acc = 0.0;
    for (std::size_t i = 0; i < m; ++i) acc += x[i * n + j];
    out[j] = float(acc);
  }
};
/// Adds a bias row to each row of a row-major [m, n] matrix; (row, j) = (row, column).
struct AddRowBias {
  float* y; const float* b; std::size_t n;
  GRADSYNC_HD void operator()(std::size_t r, std::size_t j) const { y[r * n + j] += b[j]; }
};

/// Max pooling, output o of an (image, channel) plane; records the argmax (index within the plane),
/// the first of equal maxima in window order (a window of NaN/-Inf only: its first position).
struct MaxPoolForward {
  const float* x; float* y; std::uint32_t* arg; std::size_t h, w, k, stride, pad, oh, ow;
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t o) const {
    const float* in = x + plane * h * w;
    const std::size_t oy = o / ow, ox = o % ow;
    float best = -INFINITY;
    long best_i = -1;
    for (std::size_t ky = 0; ky < k; ++ky) {
      const long iy = long(oy * stride + ky) - long(pad);
      if (iy < 0 || iy >= long(h)) continue;
      for (std::size_t kx = 0; kx < k; ++kx) {
        const long ix = long(ox * stride + kx) - long(pad);
        if (ix < 0 || ix >= long(w)) continue;
        const float v = in[iy * long(w) + ix];
        if (best_i < 0 || v > best) { best = v; best_i = iy * long(w) + ix; }
      }
    }
    y[plane * oh * ow + o] = best;
    arg[plane * oh * ow + o] = std::uint32_t(best_i);
  }
};
/// Input gradient j of a plane: the sum of dy over the outputs whose argmax is j, in output order;
/// on a device a gather, so no two threads write the same element.
struct MaxPoolBackward {
  const float* dy; const std::uint32_t* arg; float* dx; std::size_t w, k, stride, pad, oh, ow, in_plane;
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const {
    // Windows over coordinate c: o * stride - pad <= c <= o * stride - pad + k - 1, o in [lo, hi).
    auto covering = [&](std::size_t c, std::size_t n, std::size_t& lo, std::size_t& hi) {
      lo = c + pad + 1 > k ? (c + pad + 1 - k + stride - 1) / stride : 0;
      hi = (c + pad) / stride + 1;
      if (hi > n) hi = n;
    };
    std::size_t ylo, yhi, xlo, xhi;
    covering(j / w, oh, ylo, yhi);
    covering(j % w, ow, xlo, xhi);
    const std::size_t base = plane * oh * ow;
    float acc = 0.0f;
    for (std::size_t oy = ylo; oy < yhi; ++oy)
      for (std::size_t ox = xlo; ox < xhi; ++ox)
        if (arg[base + oy * ow + ox] == j) acc += dy[base + oy * ow + ox];
    dx[plane * in_plane + j] = acc;
  }
#if !defined(__CUDACC__)
  /// Row form (host, one thread per plane): the scatter, adding in the same output order, without
  /// the gather's window arithmetic per input element (it was 17% of AlexNet-BN's step).
  void operator()(std::size_t plane) const {
    float* d = dx + plane * in_plane;
    for (std::size_t j = 0; j < in_plane; ++j) d[j] = 0.0f;
    const std::size_t base = plane * oh * ow;
    for (std::size_t o = 0; o < oh * ow; ++o) d[arg[base + o]] += dy[base + o];
  }
#endif
};
/// Global average pooling's backward: dx = dy[plane] / s at each of the plane's s positions.
struct PlaneBroadcast {
  const float* dy; float* dx; std::size_t s;
  GRADSYNC_HD void operator()(std::size_t plane, std::size_t j) const { dx[plane * s + j] = dy[plane] / float(s); }
};

GRADSYNC_HD inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
/// One LSTM time step on pre-activations a [N, 4H] (gates i, f, g, o); (row, j) = (n, j).
/// Writes the activated gates back into a, and the new cell and hidden states.
struct LstmCellForward {
  float* a; const float* c_prev; float* c; float* h; std::size_t hidden;
  GRADSYNC_HD void operator()(std::size_t n, std::size_t j) const {
    const std::size_t idx = n * hidden + j;
    float* g = a + n * 4 * hidden;
    const float ig = sigmoid(g[j]), fg = sigmoid(g[hidden + j]), gg = std::tanh(g[2 * hidden + j]),
                og = sigmoid(g[3 * hidden + j]);
    g[j] = ig; g[hidden + j] = fg; g[2 * hidden + j] = gg; g[3 * hidden + j] = og;
    const float cn = cell(n, j);
    c[idx] = cn;
    h[idx] = og * std::tanh(cn);
  }
  /// The new cell state from the activated gates in a: f * c_prev + i * g.
  GRADSYNC_HD float cell(std::size_t n, std::size_t j) const {
    const float* g = a + n * 4 * hidden;
    return g[hidden + j] * c_prev[n * hidden + j] + g[j] * g[2 * hidden + j];
  }
#if !defined(__CUDACC__)
  /// Row n on the host: the activations a row at a time (host_math.hpp).
  void operator()(std::size_t n) const {
    const std::size_t h4 = 4 * hidden, row = n * hidden;
    float* g = a + n * h4;
    host::logistic(g, 2 * hidden);  // i, f
    host::tanh(g + 2 * hidden, g + 2 * hidden, hidden);
    host::logistic(g + 3 * hidden, hidden);
    for (std::size_t j = 0; j < hidden; ++j) c[row + j] = cell(n, j);
    host::tanh(c + row, h + row, hidden);
    for (std::size_t j = 0; j < hidden; ++j) h[row + j] *= g[3 * hidden + j];
  }
#endif
};
/// Backward of one step: from dh (incoming + from t+1) and dc_next, the pre-activation gradients
/// da [N, 4H] and dc for step t-1 (written over dc_next); (row, j) = (n, j).
struct LstmCellBackward {
  const float* gates; const float* c_prev; const float* c; const float* dh; float* dc_next; float* da;
  std::size_t hidden;
  /// Element j of a row, from the row's pointers (g, d: its 4H gates and gradients; the others its
  /// H values) and tc = tanh(c).
  GRADSYNC_HD static void element(const float* g, const float* c_prev, const float* dh, float* dc_next, float* d,
                                  std::size_t hidden, std::size_t j, float tc) {
    const float ig = g[j], fg = g[hidden + j], gg = g[2 * hidden + j], og = g[3 * hidden + j];
    const float dc = dh[j] * og * (1.0f - tc * tc) + dc_next[j];
    d[j] = dc * gg * ig * (1.0f - ig);
    d[hidden + j] = dc * c_prev[j] * fg * (1.0f - fg);
    d[2 * hidden + j] = dc * ig * (1.0f - gg * gg);
    d[3 * hidden + j] = dh[j] * tc * og * (1.0f - og);
    dc_next[j] = dc * fg;
  }
  GRADSYNC_HD void operator()(std::size_t n, std::size_t j) const {
    const std::size_t row = n * hidden;
    element(gates + 4 * row, c_prev + row, dh + row, dc_next + row, da + 4 * row, hidden, j, std::tanh(c[row + j]));
  }
#if !defined(__CUDACC__)
  /// Row n on the host: tanh(c) a row at a time (host_math.hpp) into da's o slot, read there first.
  /// ivdep: the arrays never overlap, but the compiler would check it at run time, 40 checks, over
  /// its limit, and run the loop scalar (a tenth of the layer's time).
  void operator()(std::size_t n) const {
    const std::size_t row = n * hidden;
    const float *g = gates + 4 * row, *cp = c_prev + row, *dhr = dh + row;
    float *d = da + 4 * row, *dcn = dc_next + row;
    host::tanh(c + row, d + 3 * hidden, hidden);
#pragma GCC ivdep
    for (std::size_t j = 0; j < hidden; ++j) element(g, cp, dhr, dcn, d, hidden, j, d[3 * hidden + j]);
  }
#endif
};

/// Row r of y (stride y_stride, from y_offset) = row r of x (stride x_stride, from x_offset), `len`
/// floats: picks time steps and interleaves blocks without host loops.
struct StridedRows {
  const float* x; float* y; std::size_t len, x_stride, x_offset, y_stride, y_offset;
  GRADSYNC_HD void operator()(std::size_t r) const {
    const float* src = x + r * x_stride + x_offset;
    float* dst = y + r * y_stride + y_offset;
    for (std::size_t j = 0; j < len; ++j) dst[j] = src[j];
  }
};
/// x [outer, a, b, inner] -> y [outer, b, a, inner]; i = row (outer, b, a) of y.
struct SwapAxes {
  const float* x; float* y; std::size_t a, b, inner;
  GRADSYNC_HD void operator()(std::size_t row) const {
    const std::size_t ia = row % a, ib = (row / a) % b, o = row / (a * b);
    const float* src = x + ((o * a + ia) * b + ib) * inner;
    float* dst = y + row * inner;
    for (std::size_t j = 0; j < inner; ++j) dst[j] = src[j];
  }
};
/// Embedding rows: y[r] = weight[ids[r]]; i = r.
struct EmbeddingGather {
  const float* weight; const std::uint32_t* ids; float* y; std::size_t dim;
  GRADSYNC_HD void operator()(std::size_t r) const {
    const float* src = weight + std::size_t(ids[r]) * dim;
    for (std::size_t j = 0; j < dim; ++j) y[r * dim + j] = src[j];
  }
};
/// Embedding gradient: grad[ids[r]][j] += dy[r][j] over rows in order; i = column j, so repeated ids
/// never race and the sum order is fixed.
struct EmbeddingScatter {
  const float* dy; const std::uint32_t* ids; float* grad; std::size_t rows, dim;
  GRADSYNC_HD void operator()(std::size_t j) const {
    for (std::size_t r = 0; r < rows; ++r) grad[std::size_t(ids[r]) * dim + j] += dy[r * dim + j];
  }
};
/// Cross-entropy gradient from the probabilities: (p - onehot(label)) / m; i = row.
struct XentGrad {
  float* d; const std::int32_t* labels; std::size_t c; float inv_m;
  GRADSYNC_HD void operator()(std::size_t r) const {
    float* p = d + r * c;
    p[labels[r]] -= 1.0f;
    for (std::size_t j = 0; j < c; ++j) p[j] *= inv_m;
  }
};
/// dh = dy at step s (rows of [N, T, H]) + dh from step s + 1; (row, j) = (n, j).
struct LstmStepGrad {
  const float* dy; const float* dh_next; float* dh; std::size_t t, s, hidden;
  GRADSYNC_HD void operator()(std::size_t n, std::size_t j) const {
    dh[n * hidden + j] = dy[(n * t + s) * hidden + j] + dh_next[n * hidden + j];
  }
};

/// Softmax cross-entropy per row: probabilities, loss and correctness; i = row.
struct SoftmaxXent {
  const float* logits; const std::int32_t* labels; float* probs; float* loss; std::uint8_t* correct;
  std::size_t c;
  GRADSYNC_HD void operator()(std::size_t r) const {
    const float* z = logits + r * c;
    float* p = probs + r * c;
    std::size_t arg = 0;
    for (std::size_t j = 1; j < c; ++j) if (z[j] > z[arg]) arg = j;
    const float mx = z[arg];
    double sum = 0.0;
    for (std::size_t j = 0; j < c; ++j) { p[j] = std::exp(z[j] - mx); sum += p[j]; }
    const float inv = float(1.0 / sum);
    for (std::size_t j = 0; j < c; ++j) p[j] *= inv;
    const std::int32_t y = labels[r];
    loss[r] = float(std::log(sum)) - (z[y] - mx);
    correct[r] = std::size_t(y) == arg;
  }
};

}  // namespace gradsync::trainer::kernels
