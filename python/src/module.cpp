// gradsync._C: the compiled half of gradsync.torch (python/gradsync/torch.py holds the rest). One
// Replica per DistributedOptimizer: its transport (MPI under mpirun, else a world of one) and a
// gradsync::torch::Attachment<AnySynchronizer>. Every call that may wait releases the GIL; the
// optimizer callbacks take it back.
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gradsync/any_synchronizer.hpp>
#include <gradsync/codec/any.hpp>
#include <gradsync/sim/link_tuning.hpp>
#include <gradsync/sim/median.hpp>
#include <gradsync/torch/attachment.hpp>
#include <gradsync/torch/bucket_reducer.hpp>
#include <gradsync/transport/in_process.hpp>
#include <gradsync/transport/throttled.hpp>
#if defined(GRADSYNC_WITH_MPI)
#include <gradsync/transport/mpi.hpp>
#include <gradsync/transport/mpi_session.hpp>
#endif

namespace py = pybind11;
namespace gs = gradsync;

namespace {

using Attachment = gs::torch::Attachment<gs::AnySynchronizer>;

/// A transport over the job's ranks: MPI's, or a world of one.
struct Connection {
  std::unique_ptr<gs::transport::Transport> mpi;
  std::unique_ptr<gs::transport::InProcessGroup> solo;
  gs::transport::Transport& get() { return mpi ? *mpi : solo->rank(0); }
};

/// The process's place in the job: MPI when launched by mpirun (or srun/PMI), else a world of one.
class World {
 public:
  static World& get() {
    static World* world = new World;  // lives until shutdown(); never destroyed after Python is gone
    return *world;
  }
  int rank() { return helper_.get().rank(); }
  int size() { return helper_.get().size(); }
  bool mpi() const { return mpi_launched_; }
  /// A new transport over every rank of the job (all ranks create theirs in the same order).
  Connection connect(std::chrono::milliseconds timeout) {
    Connection c;
#if defined(GRADSYNC_WITH_MPI)
    if (mpi_launched_) {
      c.mpi = std::make_unique<gs::transport::Mpi>(MPI_COMM_WORLD, timeout);
      return c;
    }
#endif
    c.solo = std::make_unique<gs::transport::InProcessGroup>(1, timeout);
    return c;
  }
  /// For rank 0's tensors to every rank outside a DistributedOptimizer (gradsync.torch.broadcast).
  gs::transport::Transport& helper() { return helper_.get(); }
  /// Takes a transport no longer used. MPI ones are kept until exit: a freed communicator's number
  /// is given to the next one, and Open MPI delivers to it the messages still on their way to the
  /// old one (a failed synchronizer's, say) - they would be taken for the new one's.
  void retire(Connection c) {
    if (c.mpi) retired_.push_back(std::move(c.mpi));
  }
  void shutdown() {
    helper_ = {};
    for (auto& t : retired_) (void)t.release();  // MPI_Finalize frees what is left
#if defined(GRADSYNC_WITH_MPI)
    if (session_) session_->finalize_within(std::chrono::seconds(10), 1);
    session_.reset();
#endif
  }

 private:
  World() {
#if defined(GRADSYNC_WITH_MPI)
    mpi_launched_ = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (mpi_launched_ && !initialized) session_.emplace();
    mpi_launched_ = mpi_launched_ || initialized;
#endif
    helper_ = connect(std::chrono::minutes(5));
  }

  bool mpi_launched_ = false;
#if defined(GRADSYNC_WITH_MPI)
  std::optional<gs::transport::MpiSession> session_;
#endif
  Connection helper_;
  std::vector<std::unique_ptr<gs::transport::Transport>> retired_;
};

/// A unit's life in a trace, times in steady-clock nanoseconds (Python's time.monotonic_ns()).
struct TracedUnit {
  std::uint32_t unit;
  std::int64_t iteration;
  std::size_t elements, bytes_sent;
  std::int64_t ready_ns, started_ns, finished_ns;
};

class Replica;
std::set<Replica*>& live() {
  static std::set<Replica*> replicas;
  return replicas;
}

struct Settings {
  std::string slicing, priority, codec, collective, link;
  double timeout_s;
  unsigned inflight_units;
  std::size_t credit_bytes;
  std::uint64_t seed;
  bool check_finite, trace;
  unsigned backward_passes;
  std::size_t tune_steady;
};

class Replica {
 public:
  Replica(std::vector<std::string> names, std::vector<at::Tensor> tensors, std::vector<bool> optimized,
          std::vector<std::string> module_names, std::vector<std::ptrdiff_t> parents,
          std::vector<std::vector<std::size_t>> owned, std::vector<std::string> buffer_names,
          std::vector<at::Tensor> buffers, const Settings& s, py::function step, py::function finished)
      : step_(std::move(step)), finished_(std::move(finished)) {
    // Policies first: a bad name fails on every rank alike, before any rank waits for another.
    const bool tune = s.slicing == "auto";
    Attachment::Config config{gs::AnySynchronizer::parse({tune ? "whole" : s.slicing, s.priority, s.codec, s.collective})};
    gs::collective::check_accepts(config.policies.collective, config.policies.codec);
    if (tune) {
      if (s.inflight_units || s.credit_bytes)
        throw gs::ConfigError("gradsync: slicing 'auto' chooses the window too: leave inflight_units and credit_bytes "
                              "unset, or name a slicing: whole, fixed[:N], fusion[:BYTES], slicefuse[:N], split[:P[:N]]");
      const gs::sim::TuneSpace space{.collectives = {s.collective}, .priority = s.priority, .codec = s.codec};
      config.choose = [this, space, passes = s.backward_passes](gs::transport::Transport& t,
                                                                const gs::torch::FirstIteration& first,
                                                                const gs::ModelLayout& layout,
                                                                gs::AnySynchronizer::Policies& policies,
                                                                gs::Options& options) {
        profile_ = profile_of(first, layout, passes);
        take(gs::sim::tune_on_link(t, profile_, space), space, policies, options);
      };
      if (s.tune_steady == 1 || s.tune_steady == 2)
        throw gs::ConfigError("gradsync: tune_steady=" + std::to_string(s.tune_steady) + " leaves no iteration to "
                              "measure after the first two (the profiled one and a warm-up): give 0 (keep the first "
                              "choice) or at least 3");
      config.steady_after = s.tune_steady;
      if (s.tune_steady)
        config.rechoose = [this, space](gs::transport::Transport& t, std::span<const double> compute,
                                        gs::AnySynchronizer::Policies& policies, gs::Options& options) {
          first_ = tuning_;
          if (t.rank() == 0) profile_.scale_compute_to(gs::sim::median({compute.begin(), compute.end()}));
          take(gs::sim::tune_for_link(t, profile_, space, tuning_->link), space, policies, options);
        };
    }
    const auto link = s.link.empty() ? std::optional<gs::transport::Link>() : gs::transport::Link::parse(s.link);
    if (!(s.timeout_s > 0)) throw gs::UsageError("gradsync: timeout must be positive (seconds)");
    config.options.timeout = std::chrono::milliseconds(static_cast<long long>(s.timeout_s * 1000));
    if (s.inflight_units) config.options.inflight_units = s.inflight_units;
    if (s.credit_bytes) config.options.credit_bytes = s.credit_bytes;
    config.options.seed = s.seed;
    config.options.check_finite = s.check_finite;
    if (s.trace)
      config.options.on_unit = [this](const gs::UnitEvent& e) {
        const auto ns = [](auto t) { return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count(); };
        std::lock_guard lock(trace_mutex_);
        trace_.push_back({e.unit, e.iteration, e.elements, e.bytes_sent, ns(e.ready), ns(e.started), ns(e.finished)});
      };
    config.backward_passes = s.backward_passes;

    gs::torch::Model model;
    if (tensors.size() != names.size() || optimized.size() != names.size() || parents.size() != module_names.size() ||
        owned.size() != module_names.size() || buffers.size() != buffer_names.size())
      throw gs::UsageError("gradsync._C.Replica: lists of different lengths");
    for (std::size_t i = 0; i < names.size(); ++i) model.parameters.push_back({names[i], tensors[i], optimized[i]});
    for (std::size_t i = 0; i < module_names.size(); ++i)
      model.modules.push_back({module_names[i], parents[i], std::move(owned[i])});
    for (std::size_t i = 0; i < buffer_names.size(); ++i) model.buffers.emplace_back(buffer_names[i], buffers[i]);

    gs::torch::OptimizerHooks hooks{
        .step = [this](std::span<const std::size_t> params) {
          py::gil_scoped_acquire gil;
          step_(std::vector<std::size_t>(params.begin(), params.end()));
        },
        .finished = [this] {
          py::gil_scoped_acquire gil;
          finished_();
        }};
    py::gil_scoped_release nogil;  // the model check and the broadcast wait for the other ranks
    transport_ = World::get().connect(config.options.timeout);
    if (link) throttled_ = std::make_unique<gs::transport::Throttled<>>(transport_.get(), *link);
    gs::transport::Transport& t = throttled_ ? *throttled_ : transport_.get();
    attachment_ = std::make_unique<Attachment>(t, std::move(model), std::move(config), std::move(hooks));
    live().insert(this);
  }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;
  ~Replica() {
    py::gil_scoped_release nogil;
    close();
  }

  Attachment& get() {
    if (!attachment_) throw gs::UsageError("gradsync: this DistributedOptimizer was closed");
    return *attachment_;
  }
  /// Waits for units in flight and stops the synchronizer's threads (GIL released by the caller).
  void close() {
    live().erase(this);
    attachment_.reset();
    throttled_.reset();
    World::get().retire(std::move(transport_));
  }

  py::dict stats() {
    const gs::Statistics s = get().stats();
    py::dict d;
    d["units"] = s.units;
    d["bytes_sent"] = s.bytes_sent;
    d["iterations"] = s.iterations;
    d["queued_seconds"] = s.queued_seconds;
    d["wire_seconds"] = s.wire_seconds;
    d["exposed_wait_seconds"] = s.exposed_wait_seconds;
    d["elements"] = s.elements;
    d["elements_compressed"] = s.elements_compressed;
    d["bytes_compressed"] = s.bytes_compressed;
    return d;
  }
  /// The synchronizer's policies ("fixed:40000/forward/fp32/ring"); empty before the first step().
  std::string describe() {
    const auto* sync = get().synchronizer();
    return sync ? sync->describe() : std::string();
  }
  /// Parameter names in layout (forward) order; empty before the first step().
  std::vector<std::string> layout() {
    std::vector<std::string> names;
    if (const auto* sync = get().synchronizer())
      for (const auto& l : sync->layout().layers()) names.push_back(l.name);
    return names;
  }
  /// Per unit: the layout positions of the layers it carries.
  std::vector<std::vector<std::size_t>> unit_layers() {
    std::vector<std::vector<std::size_t>> out;
    if (const auto* sync = get().synchronizer())
      for (const gs::Unit& u : sync->units()) {
        auto& layers = out.emplace_back();
        for (const gs::Segment& s : u.segments) layers.push_back(s.layer);
      }
    return out;
  }
  std::vector<TracedUnit> trace() {
    std::lock_guard lock(trace_mutex_);
    return trace_;
  }
  /// slicing "auto": what was measured and chosen (rank 0's, on every rank); None otherwise.
  py::object tuning() const {
    if (!tuning_) return py::none();
    const gs::sim::Tuning& t = *tuning_;
    py::dict d;
    d["slicing"] = t.chosen.slicing;
    d["collective"] = t.chosen.collective;
    d["inflight_units"] = t.chosen.inflight_units;
    d["credit_bytes"] = t.chosen.credit_bytes;
    d["simulated_seconds"] = t.chosen.iteration_seconds;
    d["p3_default_simulated_seconds"] = t.default_seconds;
    d["link_bytes_per_second"] = t.link.bytes_per_second;
    d["link_latency_seconds"] = t.link.latency_seconds;
    d["tuning_seconds"] = t.wall_seconds;
    d["compute_seconds"] = t.compute_seconds;
    if (first_) {  // the choice above is the second, on the measured compute; this was the first
      py::dict f;
      f["slicing"] = first_->chosen.slicing;
      f["collective"] = first_->chosen.collective;
      f["inflight_units"] = first_->chosen.inflight_units;
      f["credit_bytes"] = first_->chosen.credit_bytes;
      f["compute_seconds"] = first_->compute_seconds;
      d["first"] = f;
    }
    return d;
  }

 private:
  /// The tuner's model of this model: a compute layer per module in forward order, timed in the
  /// first iteration (one backward pass of `passes` per step: scaled to a step).
  static gs::sim::Profile profile_of(const gs::torch::FirstIteration& first, const gs::ModelLayout& layout,
                                     unsigned passes) {
    gs::sim::Profile profile{"the first iteration", {}, {}};
    for (const auto& l : first.layers) {
      auto& c = profile.layers.emplace_back(gs::sim::ComputeLayer{l.name, passes * l.forward_seconds,
                                                                  passes * l.backward_seconds, {}});
      for (std::size_t i : l.tensors) c.tensors.push_back(layout.layer(i));
    }
    profile.validate();
    return profile;
  }

  /// Keeps `tuning` and makes its choice the Synchronizer's.
  void take(gs::sim::Tuning tuning, const gs::sim::TuneSpace& space, gs::AnySynchronizer::Policies& policies,
            gs::Options& options) {
    tuning_ = std::move(tuning);
    policies = gs::AnySynchronizer::parse({tuning_->chosen.slicing, space.priority, space.codec, tuning_->chosen.collective});
    options.inflight_units = tuning_->chosen.inflight_units;
    options.credit_bytes = tuning_->chosen.credit_bytes;
  }

  py::function step_, finished_;
  Connection transport_;
  std::unique_ptr<gs::transport::Throttled<>> throttled_;
  std::unique_ptr<Attachment> attachment_;
  std::mutex trace_mutex_;
  std::vector<TracedUnit> trace_;
  std::optional<gs::sim::Tuning> tuning_, first_;  // slicing "auto": the choice, and the first where it chose again
  gs::sim::Profile profile_;                       // slicing "auto": rank 0's model of the model
};

/// gradsync.torch.ddp_comm_hook's engine: a BucketReducer on a transport of its own.
class HookReducer;
std::set<HookReducer*>& live_hooks() {
  static std::set<HookReducer*> hooks;
  return hooks;
}

class HookReducer {
 public:
  HookReducer(const gs::torch::BucketReducer::Config& config, double timeout_s) {
    if (!(timeout_s > 0)) throw gs::UsageError("gradsync: timeout must be positive (seconds)");
    py::gil_scoped_release nogil;  // the handshake waits for the other ranks
    transport_ = World::get().connect(std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000)));
    reducer_ = std::make_unique<gs::torch::BucketReducer>(transport_.get(), config);
    live_hooks().insert(this);
  }
  HookReducer(const HookReducer&) = delete;
  HookReducer& operator=(const HookReducer&) = delete;
  ~HookReducer() {
    py::gil_scoped_release nogil;
    close();
  }

  /// Queues DDP's bucket; `done(None)` or `done((error type name, message))` is called on the
  /// reducer's thread, with the GIL, when it is aggregated in place.
  void submit(at::Tensor bucket, std::uint32_t index, bool last, py::object done) {
    if (!reducer_) throw gs::UsageError("gradsync: this ddp_comm_hook was closed; register a new one");
    if (!bucket.device().is_cpu() || bucket.scalar_type() != at::kFloat || !bucket.is_contiguous())
      throw gs::UsageError("gradsync.torch.ddp_comm_hook: DDP's bucket must be a contiguous float32 CPU tensor (got " +
                           std::string(bucket.toString()) + " on " + bucket.device().str() +
                           "); the hook runs CPU models with fp32 parameters");
    const std::span<float> data(bucket.data_ptr<float>(), static_cast<std::size_t>(bucket.numel()));
    auto* pending = new Completion{std::move(done), std::move(bucket)};  // freed under the GIL, on whichever thread
    try {
      reducer_->submit(data, index, last, [pending](std::exception_ptr why) { finish(pending, why); });
    } catch (...) {
      delete pending;
      throw;
    }
  }
  void close() {
    live_hooks().erase(this);
    reducer_.reset();
    World::get().retire(std::move(transport_));
  }
  py::dict stats() const {
    if (!reducer_) throw gs::UsageError("gradsync: this ddp_comm_hook was closed");
    const auto s = reducer_->stats();
    py::dict d;
    d["buckets"] = s.buckets;
    d["iterations"] = s.iterations;
    d["elements"] = s.elements;
    d["bytes_sent"] = s.bytes_sent;
    d["collective_seconds"] = s.collective_seconds;
    return d;
  }
  std::string describe() const { return reducer_ ? reducer_->describe() : std::string(); }

 private:
  /// What a queued bucket holds on to: Python objects, so created and freed under the GIL.
  struct Completion {
    py::object done;
    at::Tensor bucket;
  };
  static void finish(Completion* pending, std::exception_ptr why) {
    py::gil_scoped_acquire gil;
    std::unique_ptr<Completion> own(pending);
    py::object error = py::none();
    if (why) {
      try {
        std::rethrow_exception(why);
      } catch (const gs::ConfigError& e) {
        error = py::make_tuple("ConfigError", e.what());
      } catch (const gs::UsageError& e) {
        error = py::make_tuple("UsageError", e.what());
      } catch (const gs::PeerError& e) {
        error = py::make_tuple("PeerError", e.what());
      } catch (const gs::WireError& e) {
        error = py::make_tuple("WireError", e.what());
      } catch (const std::exception& e) {
        error = py::make_tuple("RuntimeError", e.what());
      }
    }
    try {
      own->done(error);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("gradsync.torch.ddp_comm_hook's completion");
    }
  }

  Connection transport_;
  std::unique_ptr<gs::torch::BucketReducer> reducer_;
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "gradsync's compiled core for gradsync.torch";
  py::register_exception<gs::ConfigError>(m, "ConfigError", PyExc_ValueError);
  py::register_exception<gs::UsageError>(m, "UsageError", PyExc_ValueError);
  py::register_exception<gs::PeerError>(m, "PeerError", PyExc_RuntimeError);  // PeerTimeout too
  py::register_exception<gs::WireError>(m, "WireError", PyExc_RuntimeError);

  m.def("world", [] {
    World* w = nullptr;
    {
      py::gil_scoped_release nogil;  // MPI's start-up waits for the other ranks
      w = &World::get();
    }
    return py::make_tuple(w->rank(), w->size(), w->mpi());
  }, "(rank, size, launched by MPI) of this process; starts MPI under mpirun");
  m.def("broadcast", [](at::Tensor t) {
    if (!t.device().is_cpu() || !t.is_contiguous())
      throw gs::UsageError("gradsync.torch.broadcast: needs a contiguous CPU tensor");
    py::gil_scoped_release nogil;
    gs::torch::broadcast_into(World::get().helper(), std::span(static_cast<std::byte*>(t.data_ptr()), t.nbytes()));
  }, "Rank 0's tensor into every rank's (same shape and dtype everywhere)");
  m.def("shutdown", [] {
    py::gil_scoped_release nogil;
    for (Replica* r : std::set<Replica*>(live())) r->close();
    for (HookReducer* h : std::set<HookReducer*>(live_hooks())) h->close();
    World::get().shutdown();
  }, "Closes every DistributedOptimizer and ddp_comm_hook and finalizes MPI (at exit)");
  m.def("encoded_bytes", [](const std::string& codec, std::size_t n) {
    return gs::codec::AnyCodec::parse(codec).encoded_bytes(n);
  }, "Bytes codec `codec` puts on the wire for a unit of n elements");

  py::class_<Settings>(m, "Settings")
      .def(py::init<>())
      .def_readwrite("slicing", &Settings::slicing)
      .def_readwrite("priority", &Settings::priority)
      .def_readwrite("codec", &Settings::codec)
      .def_readwrite("collective", &Settings::collective)
      .def_readwrite("link", &Settings::link)
      .def_readwrite("timeout_s", &Settings::timeout_s)
      .def_readwrite("inflight_units", &Settings::inflight_units)
      .def_readwrite("credit_bytes", &Settings::credit_bytes)
      .def_readwrite("seed", &Settings::seed)
      .def_readwrite("check_finite", &Settings::check_finite)
      .def_readwrite("trace", &Settings::trace)
      .def_readwrite("backward_passes", &Settings::backward_passes)
      .def_readwrite("tune_steady", &Settings::tune_steady);

  py::class_<TracedUnit>(m, "TracedUnit")
      .def_readonly("unit", &TracedUnit::unit)
      .def_readonly("iteration", &TracedUnit::iteration)
      .def_readonly("elements", &TracedUnit::elements)
      .def_readonly("bytes_sent", &TracedUnit::bytes_sent)
      .def_readonly("ready_ns", &TracedUnit::ready_ns)
      .def_readonly("started_ns", &TracedUnit::started_ns)
      .def_readonly("finished_ns", &TracedUnit::finished_ns);

  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<Replica>(m, "Replica")
      .def(py::init<std::vector<std::string>, std::vector<at::Tensor>, std::vector<bool>, std::vector<std::string>,
                    std::vector<std::ptrdiff_t>, std::vector<std::vector<std::size_t>>, std::vector<std::string>,
                    std::vector<at::Tensor>, const Settings&, py::function, py::function>())
      .def("before_forward", [](Replica& r, std::size_t module) { r.get().before_forward(module); }, release())
      .def("step", [](Replica& r) { r.get().step(); }, release())
      .def("zero_grad", [](Replica& r, bool set_to_none) { r.get().zero_grad(set_to_none); })
      .def("synchronize", [](Replica& r) { r.get().synchronize(); }, release())
      .def("abort", [](Replica& r, const std::string& why) { r.get().abort(why); })
      .def("stepping_modules", [](Replica& r) { return r.get().stepping_modules(); })
      .def("stats", &Replica::stats)
      .def("describe", &Replica::describe)
      .def("layout", &Replica::layout)
      .def("unit_layers", &Replica::unit_layers)
      .def("trace", &Replica::trace)
      .def("tuning", &Replica::tuning)
      .def("close", &Replica::close, release());

  using Config = gs::torch::BucketReducer::Config;
  py::class_<HookReducer>(m, "HookReducer")
      .def(py::init([](std::string codec, std::string collective, std::uint64_t seed, bool check_finite,
                       double timeout_s) {
             return std::make_unique<HookReducer>(Config{std::move(codec), std::move(collective), seed, check_finite},
                                                  timeout_s);
           }),
           py::arg("codec"), py::arg("collective"), py::arg("seed"), py::arg("check_finite"), py::arg("timeout_s"))
      .def("submit", &HookReducer::submit)
      .def("stats", &HookReducer::stats)
      .def("describe", &HookReducer::describe)
      .def("close", &HookReducer::close, release());
}
