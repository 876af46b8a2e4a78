// The host build's convolutions through oneDNN (onednn.hpp): primitives per input shape, the
// batch split over the calling thread's team, reorders between plain and oneDNN's formats.
#include "gradsync/trainer/onednn.hpp"

#include <algorithm>
#include <gradsync/core/error.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "gradsync/trainer/backend.hpp"
#include "gradsync/trainer/tensor.hpp"

namespace gradsync::trainer::onednn {

namespace {
using md = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
constexpr auto f32 = dnnl::memory::data_type::f32;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Scratchpads are ours (one per team member and call), so primitives may run on any thread.
dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

dnnl::memory wrap(const md& d, const void* p) { return dnnl::memory(d, engine(), const_cast<void*>(p)); }

/// Floats enough for `d` (oneDNN's blocked formats pad channels up to the block).
std::size_t floats(const md& d) { return (d.get_size() + sizeof(float) - 1) / sizeof(float); }

/// A scratchpad of `bytes` (pooled host memory: the same sizes come back every iteration).
Buffer<float> scratchpad(std::size_t bytes) { return Buffer<float>(bytes / sizeof(float) + 1); }

/// A primitive and the scratchpad it needs.
struct Step {
  dnnl::primitive prim;
  std::size_t scratch = 0;
  explicit operator bool() const { return bool(prim); }
  template <class Primitive>
  static Step of(const typename Primitive::primitive_desc& pd) {
    return {Primitive(pd), pd.scratchpad_desc().get_size()};
  }
  void run(std::unordered_map<int, dnnl::memory> args, Buffer<float>& scratch_space) const {
    if (scratch) {
      const md bytes({dims::value_type(scratch)}, dnnl::memory::data_type::u8, tag::x);
      args.emplace(DNNL_ARG_SCRATCHPAD, wrap(bytes, scratch_space.data()));
    }
    prim.execute(stream(), args);
    stream().wait();
  }
};

/// if_needed: none (an empty step) when the formats agree; always: a copy then; accumulate: adds
/// to what `to` holds.
enum class Reorder { if_needed, always, accumulate };

Step reorder(const md& from, const md& to, Reorder how = Reorder::if_needed) {
  if (from == to && how == Reorder::if_needed) return {};
  dnnl::primitive_attr attr = user_scratchpad();
  if (how == Reorder::accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return Step::of<dnnl::reorder>(dnnl::reorder::primitive_desc(engine(), from, engine(), to, attr));
}

/// Runs `s` from `src` (format `from`) into `dst` (format `to`) and returns dst; without a step
/// (same format) returns src untouched.
const float* convert(const Step& s, const md& from, const float* src, const md& to, float* dst,
                     Buffer<float>& scratch) {
  if (!s) return src;
  s.run({{DNNL_ARG_FROM, wrap(from, src)}, {DNNL_ARG_TO, wrap(to, dst)}}, scratch);
  return dst;
}
}  // namespace

/// Everything for one input shape: the batch is split into the team's slices (at most two sizes,
/// floor and ceiling of n / team), each slice size with its own primitives and reorders.
struct Convolution::Plan {
  struct Slice {
    std::size_t images = 0;
    md x, y, weights, bias;  // plain: input and output slices, OIHW weights, [out] bias
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_backward_data::primitive_desc data_pd;
    dnnl::convolution_backward_weights::primitive_desc weights_pd;
    Step fwd, data, grad;                   // forward, backward data, backward weights
    Step x_in;                              // plain x -> forward src (kept: the weight gradient's input)
    Step kept_to_grad;                      // forward src -> weight-gradient src, where they differ
    Step y_out, dy_grad, dy_data, dx_out;   // the activations' formats to and from plain
    Step w_fwd, w_data, dw_set, dw_add;     // the weights' formats; dw_add accumulates
    std::size_t scratch = 0;                // the most any step needs
    Buffer<float> w_fwd_space, w_data_space;  // this call's weights in the forward / data formats
  };
  struct Member {
    std::size_t slice = 0, first = 0;  // slice index, first image
    Buffer<float> kept;                 // the training forward's input, forward src format
    Buffer<float> dy;                   // dy in the weight gradient's format (backward data reuses it)
    Buffer<float> dw, db;               // partial weight (and bias) gradients, member order summed
  };
  std::size_t n = 0, h = 0, w = 0, team = 0, oh = 0, ow = 0;
  std::vector<Slice> slices;
  std::vector<Member> members;  // min(team, n): a member per non-empty slice
};

namespace {
using Plan = Convolution::Plan;

Plan::Slice make_slice(const ConvGeometry& g, std::size_t images, std::size_t h, std::size_t w, std::size_t oh,
                       std::size_t ow) {
  using D = dims::value_type;
  Plan::Slice s;
  s.images = images;
  const D n = D(images), in = D(g.in), out = D(g.out), k = D(g.kernel);
  s.x = md({n, in, D(h), D(w)}, f32, tag::nchw);
  s.y = md({n, out, D(oh), D(ow)}, f32, tag::nchw);
  s.weights = md({out, in, k, k}, f32, tag::oihw);
  s.bias = g.bias ? md({out}, f32, tag::x) : md();
  const dims strides{D(g.stride), D(g.stride)}, pad{D(g.pad), D(g.pad)};
  const md any_x({n, in, D(h), D(w)}, f32, tag::any), any_y({n, out, D(oh), D(ow)}, f32, tag::any),
      any_w({out, in, k, k}, f32, tag::any);
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::primitive_attr attr = user_scratchpad();
  s.fwd_pd = dnnl::convolution_forward::primitive_desc(
      {dnnl::prop_kind::forward_training, algo, any_x, any_w, s.bias, any_y, strides, pad, pad}, attr, engine());
  // The weight gradient reads the kept input in the forward's format (no second reorder).
  s.weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      {algo, s.fwd_pd.src_desc(), any_w, s.bias, any_y, strides, pad, pad}, attr, engine(), s.fwd_pd);
  // Where the forward takes plain input (few channels: oneDNN's first-layer kernels), a blocked
  // input gradient would pad the channels up to the block (measured 10-20x slower); plain there too.
  const md dx_format = s.fwd_pd.src_desc() == s.x ? s.x : any_x;
  s.data_pd = dnnl::convolution_backward_data::primitive_desc({algo, dx_format, any_w, any_y, strides, pad, pad}, attr,
                                                              engine(), s.fwd_pd);
  s.fwd = Step::of<dnnl::convolution_forward>(s.fwd_pd);
  s.data = Step::of<dnnl::convolution_backward_data>(s.data_pd);
  s.grad = Step::of<dnnl::convolution_backward_weights>(s.weights_pd);
  s.x_in = reorder(s.x, s.fwd_pd.src_desc(), Reorder::always);
  s.kept_to_grad = reorder(s.fwd_pd.src_desc(), s.weights_pd.src_desc());
  s.y_out = reorder(s.fwd_pd.dst_desc(), s.y);
  s.dy_grad = reorder(s.y, s.weights_pd.diff_dst_desc());
  s.dy_data = reorder(s.y, s.data_pd.diff_dst_desc());
  s.dx_out = reorder(s.data_pd.diff_src_desc(), s.x);
  s.w_fwd = reorder(s.weights, s.fwd_pd.weights_desc());
  s.w_data = reorder(s.weights, s.data_pd.weights_desc());
  s.dw_set = reorder(s.weights_pd.diff_weights_desc(), s.weights, Reorder::always);
  s.dw_add = reorder(s.weights_pd.diff_weights_desc(), s.weights, Reorder::accumulate);
  for (const Step* st : {&s.fwd, &s.data, &s.grad, &s.x_in, &s.kept_to_grad, &s.y_out, &s.dy_grad, &s.dy_data,
                         &s.dx_out, &s.w_fwd, &s.w_data, &s.dw_set, &s.dw_add})
    s.scratch = std::max(s.scratch, st->scratch);
  return s;
}

/// body(member) on each member of the plan, member 0 on the calling thread; one at a time when
/// the plan has a single member.
template <class F>
void each_member(Plan& p, const F& body) {
  if (p.members.size() == 1) return body(p.members[0]);
  const auto part = [&](std::size_t t, std::size_t) {
    single_threaded();
    if (t < p.members.size()) body(p.members[t]);
  };
  host::run_team(
      [](const void* c, std::size_t t, std::size_t team) { (*static_cast<const decltype(part)*>(c))(t, team); },
      &part);
}
}  // namespace

Convolution::Convolution(ConvGeometry g) : g_(g) {}

void Convolution::require_training_forward(const char* what) const {
  if (!trained_)
    throw UsageError(std::string("convolution ") + what +
                     ": no training forward to differentiate (the last forward was an evaluation, or none ran); "
                     "run forward with Context::training first");
}
Convolution::~Convolution() = default;

Plan& Convolution::plan_for(std::size_t n, std::size_t h, std::size_t w) {
  single_threaded();
  const std::size_t team = std::size_t(host::threads());
  for (auto& p : plans_)
    if (p->n == n && p->h == h && p->w == w && p->team == team) return *p;
  auto p = std::make_unique<Plan>();
  p->n = n;
  p->h = h;
  p->w = w;
  p->team = team;
  p->oh = (h + 2 * g_.pad - g_.kernel) / g_.stride + 1;
  p->ow = (w + 2 * g_.pad - g_.kernel) / g_.stride + 1;
  const std::size_t parts = std::min(team, n);
  try {
    for (std::size_t t = 0; t < parts; ++t) {
      const std::size_t first = n * t / parts, images = n * (t + 1) / parts - first;
      auto same = std::find_if(p->slices.begin(), p->slices.end(),
                               [&](const Plan::Slice& s) { return s.images == images; });
      if (same == p->slices.end()) {
        p->slices.push_back(make_slice(g_, images, h, w, p->oh, p->ow));
        same = p->slices.end() - 1;
      }
      p->members.push_back({std::size_t(same - p->slices.begin()), first, {}, {}, {}, {}});
    }
  } catch (const dnnl::error& e) {
    throw UsageError("convolution " + std::to_string(g_.in) + "->" + std::to_string(g_.out) + " channels, kernel " +
                     std::to_string(g_.kernel) + ", input " + std::to_string(h) + "x" + std::to_string(w) +
                     ": oneDNN has no implementation (" + e.what() +
                     "); pin the im2col lowering (Conv2d::set_lowering) for this layer");
  }
  plans_.push_back(std::move(p));
  return *plans_.back();
}

void Convolution::forward(const float* x, std::size_t n, std::size_t h, std::size_t w, const float* weight,
                          const float* bias, float* y, bool training) {
  Plan& p = plan_for(n, h, w);
  const std::size_t x_image = g_.in * h * w, y_image = g_.out * p.oh * p.ow;
  for (auto& s : p.slices) {  // this call's weights in each slice's format, once per slice size
    Buffer<float> scratch = scratchpad(s.w_fwd.scratch);
    if (s.w_fwd) s.w_fwd_space.resize(floats(s.fwd_pd.weights_desc()));
    convert(s.w_fwd, s.weights, weight, s.fwd_pd.weights_desc(), s.w_fwd_space.data(), scratch);
  }
  each_member(p, [&](Plan::Member& m) {
    const Plan::Slice& s = p.slices[m.slice];
    Buffer<float> scratch = scratchpad(s.scratch), y_space, src_space;
    // Training keeps the input for the weight gradient; evaluation (large batches) only borrows.
    Buffer<float>& src = training ? m.kept : src_space;
    src.resize(floats(s.fwd_pd.src_desc()));
    s.x_in.run({{DNNL_ARG_FROM, wrap(s.x, x + m.first * x_image)},
                {DNNL_ARG_TO, wrap(s.fwd_pd.src_desc(), src.data())}},
               scratch);
    float* y_slice = y + m.first * y_image;
    if (s.y_out) y_space.resize(floats(s.fwd_pd.dst_desc()));
    float* dst = s.y_out ? y_space.data() : y_slice;
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, wrap(s.fwd_pd.src_desc(), src.data())},
        {DNNL_ARG_WEIGHTS, wrap(s.fwd_pd.weights_desc(), s.w_fwd ? s.w_fwd_space.data() : weight)},
        {DNNL_ARG_DST, wrap(s.fwd_pd.dst_desc(), dst)}};
    if (g_.bias) args.emplace(DNNL_ARG_BIAS, wrap(s.bias, bias));
    s.fwd.run(std::move(args), scratch);
    convert(s.y_out, s.fwd_pd.dst_desc(), dst, s.y, y_slice, scratch);
  });
  last_ = &p;
  trained_ = training;
}

void Convolution::backward_weights(const float* dy, float* dweight, float* dbias) {
  require_training_forward("backward_weights");
  Plan& p = *last_;
  const std::size_t y_image = g_.out * p.oh * p.ow;
  const bool alone = p.members.size() == 1;
  each_member(p, [&](Plan::Member& m) {
    const Plan::Slice& s = p.slices[m.slice];
    const md& dw_format = s.weights_pd.diff_weights_desc();
    Buffer<float> scratch = scratchpad(s.scratch), src_space;
    const float* src = m.kept.data();
    if (s.kept_to_grad) {
      src_space.resize(floats(s.weights_pd.src_desc()));
      src = convert(s.kept_to_grad, s.fwd_pd.src_desc(), src, s.weights_pd.src_desc(), src_space.data(), scratch);
    }
    const float* dy_slice = dy + m.first * y_image;
    if (s.dy_grad) m.dy.resize(floats(s.weights_pd.diff_dst_desc()));
    const float* diff_dst = convert(s.dy_grad, s.y, dy_slice, s.weights_pd.diff_dst_desc(), m.dy.data(), scratch);
    // A single member whose gradient format is plain writes the caller's arrays directly.
    const bool direct = alone && dw_format == s.weights;
    if (!direct) m.dw.resize(floats(dw_format));
    if (g_.bias && !alone) m.db.resize(g_.out);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, wrap(s.weights_pd.src_desc(), src)},
        {DNNL_ARG_DIFF_DST, wrap(s.weights_pd.diff_dst_desc(), diff_dst)},
        {DNNL_ARG_DIFF_WEIGHTS, wrap(dw_format, direct ? dweight : m.dw.data())}};
    if (g_.bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(s.bias, alone ? dbias : m.db.data()));
    s.grad.run(std::move(args), scratch);
  });
  // Partial sums added in member order: the same bits on every run with this team size.
  for (std::size_t t = 0; t < p.members.size(); ++t) {
    const Plan::Member& m = p.members[t];
    const Plan::Slice& s = p.slices[m.slice];
    if (m.dw.empty()) continue;  // written directly
    Buffer<float> scratch = scratchpad(s.scratch);
    (t == 0 ? s.dw_set : s.dw_add)
        .run({{DNNL_ARG_FROM, wrap(s.weights_pd.diff_weights_desc(), m.dw.data())},
              {DNNL_ARG_TO, wrap(s.weights, dweight)}},
             scratch);
    if (g_.bias && !alone)
      for (std::size_t o = 0; o < g_.out; ++o) dbias[o] = t == 0 ? m.db[o] : dbias[o] + m.db[o];
  }
}

void Convolution::backward_data(const float* dy, const float* weight, float* dx) {
  require_training_forward("backward_data");
  Plan& p = *last_;
  const std::size_t x_image = g_.in * p.h * p.w, y_image = g_.out * p.oh * p.ow;
  for (auto& s : p.slices) {
    Buffer<float> scratch = scratchpad(s.w_data.scratch);
    if (s.w_data) s.w_data_space.resize(floats(s.data_pd.weights_desc()));
    convert(s.w_data, s.weights, weight, s.data_pd.weights_desc(), s.w_data_space.data(), scratch);
  }
  each_member(p, [&](Plan::Member& m) {
    const Plan::Slice& s = p.slices[m.slice];
    Buffer<float> scratch = scratchpad(s.scratch), dy_space, dx_space;
    const float* diff_dst = dy + m.first * y_image;
    if (s.dy_data && s.data_pd.diff_dst_desc() == s.weights_pd.diff_dst_desc()) {
      diff_dst = m.dy.data();  // reordered by backward_weights already
    } else if (s.dy_data) {
      dy_space.resize(floats(s.data_pd.diff_dst_desc()));
      diff_dst = convert(s.dy_data, s.y, diff_dst, s.data_pd.diff_dst_desc(), dy_space.data(), scratch);
    }
    float* dx_slice = dx + m.first * x_image;
    if (s.dx_out) dx_space.resize(floats(s.data_pd.diff_src_desc()));
    float* diff_src = s.dx_out ? dx_space.data() : dx_slice;
    s.data.run({{DNNL_ARG_DIFF_DST, wrap(s.data_pd.diff_dst_desc(), diff_dst)},
                {DNNL_ARG_WEIGHTS, wrap(s.data_pd.weights_desc(), s.w_data ? s.w_data_space.data() : weight)},
                {DNNL_ARG_DIFF_SRC, wrap(s.data_pd.diff_src_desc(), diff_src)}},
               scratch);
    convert(s.dx_out, s.data_pd.diff_src_desc(), diff_src, s.x, dx_slice, scratch);
  });
}

Convolution::Extent Convolution::input() const {
  if (!last_) return {};
  return {last_->n, last_->h, last_->w};
}

std::vector<std::string> Convolution::implementations() const {
  if (!last_) return {};
  const Plan::Slice& s = last_->slices.front();
  return {s.fwd_pd.impl_info_str(), s.data_pd.impl_info_str(), s.weights_pd.impl_info_str()};
}

}  // namespace gradsync::trainer::onednn
