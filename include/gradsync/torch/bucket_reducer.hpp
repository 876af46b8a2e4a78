#pragma once
/// What gradsync.torch.ddp_comm_hook runs for PyTorch's DDP: every bucket DDP hands over,
/// aggregated across the ranks by one collective through one codec, on a thread of its own so
/// DDP's backward goes on meanwhile. DDP hands the buckets over in the same order on every rank,
/// so they run in that order: there is no priority to apply. LibTorch-free: buckets are spans.
///
/// The cast codecs (fp16, bf16) follow DDP's own compression hooks (fp16_compress_hook,
/// bf16_compress_hook) exactly: each rank rounds its bucket to the narrow type and divides it by
/// the world size there, and the collective sums those values. Every other codec sends the fp32
/// bucket and the collective averages (the Synchronizer's maths).
///
/// \code
///   gradsync::torch::BucketReducer reducer(transport, {.codec = "qsgd8", .collective = "ring"});
///   reducer.submit(bucket, index, last, [](std::exception_ptr failed) { /* bucket holds the mean */ });
/// \endcode
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../codec/any.hpp"
#include "../codec/describe.hpp"
#include "../collective/any.hpp"
#include "../core/error.hpp"
#include "../schedule/handshake.hpp"
#include "../transport/transport.hpp"

namespace gradsync::torch {

/// Polled, never sent: see BucketReducer::keep_sends_moving (sim's link tuning and the exchange
/// have the range's first three).
inline constexpr transport::Tag idle_tag = transport::tool_tags.at(3);

class BucketReducer {
 public:
  struct Config {
    std::string codec = "fp32", collective = "ring";
    std::uint64_t seed = 0;       ///< stochastic codecs' RNG key (the same on every rank)
    bool check_finite = true;     ///< a NaN or Inf in a bucket fails every rank, naming the bucket
  };
  /// Called on the reducer's thread when a bucket is done: null, or why it failed.
  using Done = std::function<void(std::exception_ptr)>;
  struct Stats {
    std::uint64_t buckets = 0, iterations = 0, elements = 0, bytes_sent = 0;
    double collective_seconds = 0;  ///< time inside the collective, summed over buckets
  };

  /// Agrees the policies with every rank (schedule::handshake: a mismatch fails on all of them).
  BucketReducer(transport::Transport& t, const Config& config)
      : t_(t), config_(config), codec_(codec::AnyCodec::parse(config.codec)),
        collective_(collective::AnyCollective::parse(config.collective)) {
    collective::check_accepts(collective_, codec_);
    if (keeps_state(collective_))
      throw ConfigError("gradsync: collective '" + collective_.describe() + "' keeps state per unit and cannot run "
                        "DDP's buckets, whose number and sizes DDP changes after the first iteration; use 'ring', "
                        "'reduce-broadcast', 'hierarchical', 'hybrid' or 'mpi', or gradsync.torch.DistributedOptimizer");
    schedule::handshake(t_, {0, t_.size(), 0, "ddp_comm_hook/" + codec::describe(codec_) + "/" + collective_.describe() +
                                                   "/seed=" + std::to_string(config.seed)});
    thread_ = std::thread([this] { serve(); });
  }
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;
  ~BucketReducer() { close(); }

  /// Queues bucket `index` (DDP's GradBucket::index(); `last`: the iteration's last bucket). The
  /// bucket must stay alive and untouched until `done` runs.
  void submit(std::span<float> bucket, std::uint32_t index, bool last, Done done) {
    std::unique_lock lock(mutex_);
    if (closed_) throw UsageError("gradsync: this ddp_comm_hook was closed; register a new one");
    queue_.push_back({bucket, index, last, std::move(done)});
    wake_.notify_one();
  }
  /// Fails what is queued and stops the thread (a bucket under way finishes first).
  void close() {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
      closed_ = true;
      wake_.notify_one();
    }
    thread_.join();
  }
  Stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  std::string describe() const { return codec::describe(codec_) + "/" + collective_.describe(); }

 private:
  static constexpr std::chrono::milliseconds idle_poll{1};

  struct Pending {
    std::span<float> bucket;
    std::uint32_t index;
    bool last;
    Done done;
  };

  static bool keeps_state(const collective::AnyCollective& k) {
    return std::visit([]<class P>(const P&) { return collective::Stateful<P>; }, k.policy);
  }
  bool casts() const {
    return std::holds_alternative<codec::Half>(codec_.variant()) ||
           std::holds_alternative<codec::BFloat16>(codec_.variant());
  }

  void serve() {
    for (;;) {
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, idle_poll, [&] { return closed_ || !queue_.empty(); })) {
        lock.unlock();
        keep_sends_moving();
        lock.lock();
      }
      if (queue_.empty()) return;
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      if (closed_) failed_ = std::make_exception_ptr(UsageError("gradsync: ddp_comm_hook closed with buckets queued"));
      lock.unlock();
      std::exception_ptr why = failed_;
      if (!why) {
        try {
          run(p);
        } catch (...) {
          why = failed_ = std::current_exception();  // the ranks are out of step now: fail what follows too
        }
      }
      p.done(why);
    }
  }

  void run(Pending& p) {
    // A non-finite value survives a plain sum (fp32, fp16, bf16): then every rank sees it in the
    // aggregate and fails on the same bucket. A lossy encode of it means nothing, so that rank fails
    // at once, and its peers when they time out waiting for it.
    const auto bad = config_.check_finite ? codec::first_non_finite(codec_, p.bucket) : std::nullopt;
    const bool cast = casts();
    const codec::Traits traits = codec_.traits();
    if (bad && !cast && !traits.lossless) throw non_finite(p, *bad, "this rank's gradient");
    grow(workspace_, p.bucket.size());
    if (cast) prescale(p.bucket);
    std::vector<float>& residual = residuals_[p.index];
    if (traits.needs_residual && residual.size() != p.bucket.size()) residual.assign(p.bucket.size(), 0.0f);
    collective::Job job{.data = p.bucket,
                        .tag = p.index,
                        .ctx = {.seed = config_.seed, .iteration = iteration_, .unit = p.index,
                                .residual = traits.needs_residual ? std::span(residual) : std::span<float>()},
                        .average = !cast};
    const auto started = std::chrono::steady_clock::now();
    const std::size_t sent = collective_.run(t_, codec_, job, workspace_);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    if (bad) throw non_finite(p, *bad, "this rank's gradient");
    if (config_.check_finite)
      if (const auto sum = codec::first_non_finite(codec_, p.bucket)) throw non_finite(p, *sum, "the ranks' aggregate (another rank's gradient)");
    std::lock_guard lock(mutex_);
    stats_.buckets += 1;
    stats_.elements += p.bucket.size();
    stats_.bytes_sent += sent;
    stats_.collective_seconds += took.count();
    if (p.last) stats_.iterations = ++iteration_;
  }

  /// MPI moves the rest of a large message only inside MPI calls on the sending side (over TCP).
  /// A bucket's last send may still be on its way when this rank goes idle, and DDP on the peer
  /// may wait for it before its next bucket (the bucket rebuild after the first iteration): while
  /// idle, call into the transport. Nothing is ever sent with idle_tag; the poll only progresses.
  void keep_sends_moving() {
    if (t_.size() > 1) (void)t_.try_recv((t_.rank() + 1) % t_.size(), idle_tag, {});
  }

  /// Buffers for the whole bucket before the collective runs, as schedule::Executors warms them.
  void grow(collective::Workspace& ws, std::size_t n) const {
    const std::size_t bytes = std::max(codec_.encoded_bytes(n), n * sizeof(float));
    if (ws.send.size() < bytes) ws.send.resize(bytes);
    if (ws.recv.size() < bytes) ws.recv.resize(bytes);
  }

  /// DDP's compress hooks: the bucket in the narrow type, divided by the world size there.
  void prescale(std::span<float> bucket) {
    const std::span<std::byte> wire = std::span(workspace_.send).first(codec_.encoded_bytes(bucket.size()));
    const auto round = [&] {
      codec_.encode(bucket, wire, {});
      codec_.decode(wire, bucket);
    };
    round();
    const float n = static_cast<float>(t_.size());
    for (float& x : bucket) x /= n;
    round();
  }

  UsageError non_finite(const Pending& p, const codec::NonFinite& bad, const std::string& where) const {
    return UsageError("gradsync: DDP's bucket " + std::to_string(p.index) + " holds a non-finite value in " + where +
                      " (element " + std::to_string(bad.index) + " is " + std::to_string(bad.value) + ") in iteration " +
                      std::to_string(iteration_) +
                      "; lower the learning rate, clip gradients, or pass check_finite=False to ddp_comm_hook "
                      "(with a loss scaler that skips such steps)");
  }

  transport::Transport& t_;
  const Config config_;
  const codec::AnyCodec codec_;
  const collective::AnyCollective collective_;
  collective::Workspace workspace_;                                  // the thread's
  std::unordered_map<std::uint32_t, std::vector<float>> residuals_;  // per bucket index: error feedback
  std::uint64_t iteration_ = 0;
  std::exception_ptr failed_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool closed_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace gradsync::torch
