#pragma once
/// Mpi: the distributed transport, over an MPI communicator (Open MPI from Debian).
///
/// \code
///   int main(int argc, char** argv) {
///     gradsync::transport::MpiSession mpi(argc, argv);          // MPI_Init_thread(MULTIPLE)
///     return mpi.run([&] {                                      // errors: message + non-zero exit
///       gradsync::transport::Mpi transport(MPI_COMM_WORLD, std::chrono::seconds(30));
///       gradsync::AnySynchronizer sync(transport, layout, {.collective = "ring"});
///       ...
///     });
///   }
/// \endcode
///
/// Needs MPI_THREAD_MULTIPLE: gradsync's executors (and the parameter server's thread) call MPI at once.
/// MpiSession also sets Open MPI's TCP eager limit to a ring segment and ignores SIGPIPE (a dead
/// peer's socket must not kill this rank: apply_mpi_defaults in mpi_session.hpp); a program that
/// calls MPI_Init_thread itself should call
/// transport::apply_mpi_defaults() first, or pass `--mca btl_tcp_eager_limit 1048640 --mca
/// btl_tcp_max_send_size 1048640` to mpirun.
/// Waits on requests go through detail::MpiWaits (one waiting thread polls for all: a few tests
/// back to back after each event, then sleeps of 100-200 us); probes poll with detail::Backoff (no sched_yield:
/// polling threads leave the cores to the compute threads).
/// Constructing an Mpi is collective (it duplicates the communicator): every rank constructs its
/// transports in the same order.
/// Point-to-point traffic goes on a private duplicate of the communicator (the user's own MPI
/// traffic cannot match it), tagged with the unit index. Every wait is MPI_Test polling against a
/// deadline, so a dead or silent peer becomes a PeerError after `timeout` instead of a hang.
/// `recv` (the data path: a caller that waits until its message comes) posts MPI_Irecv into the
/// caller's buffer at once, so a message that arrives later lands there directly (received after
/// a probe, Open MPI first holds an eager message as unexpected and copies it again: about 1.4x
/// the CPU per byte for 80 kB messages over TCP, benchmarks/transport/README.md); the receive is
/// cancelled only when the caller gives up, which ends the job (Open MPI 4.1 can lose a message
/// that matches a receive being cancelled). recv_for and try_recv, whose callers poll with short waits, probe
/// (MPI_Improbe) before they post, so a wait that times out cancels nothing.
/// `send` copies into a pooled buffer and returns (buffered semantics, no allocation once the
/// pool is warm); `send_async` sends straight from the caller's span, so the ring's fp32 segments
/// are never copied.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <mutex>
#include <vector>

#include "../detail/backoff.hpp"
#include "mpi_buffered_sends.hpp"
#include "mpi_session.hpp"
#include "mpi_waits.hpp"
#include "transport.hpp"

namespace gradsync::transport {

class Mpi final : public Transport {
 public:
  /// \param comm     the ranks of the job (duplicated: gradsync's traffic stays apart)
  /// \param timeout  how long any wait for a peer may last before PeerError
  explicit Mpi(MPI_Comm comm = MPI_COMM_WORLD, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : timeout_(timeout) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw UsageError("gradsync: transport::Mpi needs MPI initialized: create a transport::MpiSession first "
                       "(or call MPI_Init_thread with MPI_THREAD_MULTIPLE)");
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      throw UsageError("gradsync: transport::Mpi needs MPI_THREAD_MULTIPLE but MPI was initialized with level " +
                       std::to_string(level) + ": initialize with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) "
                       "or use transport::MpiSession");
    check(MPI_Comm_dup(comm, &p2p_), "MPI_Comm_dup");
    check(MPI_Comm_dup(comm, &coll_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(p2p_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(coll_, MPI_ERRORS_RETURN);
    async_.reserve(64);
    free_async_.reserve(64);
    MPI_Comm_rank(p2p_, &rank_);
    MPI_Comm_size(p2p_, &size_);
    void* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(p2p_, MPI_TAG_UB, &ub, &found);
    tag_ub_ = found ? static_cast<Tag>(*static_cast<int*>(ub)) : 32767u;
    if (tag_ub_ < last_reserved_tag)
      throw UsageError("gradsync: this MPI allows tags up to " + std::to_string(tag_ub_) + " but gradsync needs " +
                       std::to_string(last_reserved_tag) + "; use an MPI with 31-bit tags (Open MPI, MPICH)");
  }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;
  ~Mpi() override {
    // Buffered sends get a moment to drain (peers may still be receiving): a peer that takes
    // longer is gone or failing. If some are left, MPI may still use the communicators: kept.
    if (!sends_.drain(std::chrono::steady_clock::now() + std::min(timeout_, std::chrono::milliseconds(1000)))) return;
    MPI_Comm_free(&p2p_);
    MPI_Comm_free(&coll_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  std::string describe() const override {
    return "MPI rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  }
  /// The communicator for MPI's own collectives (collective::MpiNative); apart from point-to-point.
  MPI_Comm collective_comm() const { return coll_; }

  void send(int dst, Tag tag, std::span<const std::byte> data) override {
    check_peer(dst);
    check_tag(tag);
    check(sends_.start(data, count(data.size()), dst, static_cast<int>(tag), p2p_), "MPI_Isend", dst);
  }

  /// MPI_Isend straight from `data` (no pooled copy), for the ring's fp32 segments.
  SendId send_async(int dst, Tag tag, std::span<const std::byte> data) override {
    check_peer(dst);
    check_tag(tag);
    MPI_Request req;
    check(MPI_Isend(data.data(), count(data.size()), MPI_BYTE, dst, static_cast<int>(tag), p2p_, &req), "MPI_Isend", dst);
    std::lock_guard lock(mutex_);
    return store(async_, free_async_, AsyncSend{req, dst, tag});
  }
  void wait_sent(SendId id) override {
    if (wait_sent_for(id, timeout_)) return;
    AsyncSend a;
    {
      std::lock_guard lock(mutex_);
      a = async_.at(id - 1);
      abandon(async_[id - 1].request);
      free_async_.push_back(id - 1);
    }
    throw silent_peer(a.dst, a.tag, true);
  }
  /// Waits through waits_ (one thread polls for every waiting thread of this transport).
  bool wait_sent_for(SendId id, std::chrono::milliseconds wait) override {
    if (id == 0) return true;
    AsyncSend a;
    {
      std::lock_guard lock(mutex_);
      a = async_.at(id - 1);  // a copy (async_ may grow meanwhile): only this caller tests the request
    }
    MPI_Status st;
    if (!waits_.wait(a.request, st, std::chrono::steady_clock::now() + wait)) return false;
    {
      std::lock_guard lock(mutex_);
      free_async_.push_back(id - 1);
    }
    check(st.MPI_ERROR, "MPI_Isend", a.dst);
    return true;
  }
  bool test_sent(SendId id) override {
    if (id == 0) return true;
    std::unique_lock lock(mutex_);
    AsyncSend& a = async_.at(id - 1);
    int done = 0;
    MPI_Status st;
    const int rc = MPI_Test(&a.request, &done, &st);
    if (rc == MPI_SUCCESS && !done) return false;
    const int dst = a.dst;
    free_async_.push_back(id - 1);
    lock.unlock();
    check(rc, "MPI_Isend", dst);
    return true;
  }

  /// Polls try_recv until a message comes or `wait` passes: a receive is only posted for a
  /// message already matched, so a wait that ends empty has nothing to cancel (a receive
  /// cancelled while a message matches it is where Open MPI 4.1 loses messages under
  /// MPI_THREAD_MULTIPLE; gradsync's schedule thread polls like this all the time).
  std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    gradsync::detail::Backoff backoff;
    for (;;) {
      if (auto n = try_recv(src, tag, out)) return n;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      backoff.pause();
    }
  }

  /// A matched probe (MPI_Improbe) takes the message off the queue only if it is there, then
  /// MPI_Imrecv receives exactly it.
  std::optional<std::size_t> try_recv(int src, Tag tag, std::span<std::byte> out) override {
    check_peer(src);
    check_tag(tag);
    int found = 0;
    MPI_Message message;
    MPI_Status st;
    check(MPI_Improbe(src, static_cast<int>(tag), p2p_, &found, &message, &st), "MPI_Improbe");
    if (!found) return std::nullopt;
    MPI_Request req;
    check(MPI_Imrecv(out.data(), count(out.size()), MPI_BYTE, &message, &req), "MPI_Imrecv");
    if (!wait_until(req, st, std::chrono::steady_clock::now() + timeout_)) {
      abandon(req);
      throw silent_peer(src, tag);  // matched, but the sender stopped before the data came
    }
    return received(st, src, out.size());
  }

  PostedRecv post_recv(int src, Tag tag, std::span<std::byte> out) override {
    check_peer(src);
    check_tag(tag);
    MPI_Request req;
    check(MPI_Irecv(out.data(), count(out.size()), MPI_BYTE, src, static_cast<int>(tag), p2p_, &req), "MPI_Irecv", src);
    std::lock_guard lock(mutex_);
    return {src, tag, out, store(posted_, free_posted_, req)};
  }
  std::optional<std::size_t> wait_recv(PostedRecv& r, std::chrono::milliseconds wait) override {
    if (r.handle == 0) throw UsageError("gradsync: wait_recv on a receive that is over (it came, or was taken back)");
    MPI_Status st;
    if (!wait_until(posted(r.handle), st, std::chrono::steady_clock::now() + wait)) return std::nullopt;
    release(r);
    return received(st, r.src, r.out.size());
  }
  /// Cancels the receive and waits for the cancel a bounded time. A receive that matched a message
  /// still arriving completes with it instead; one still arriving after that comes from a peer that
  /// stopped mid-message, and is freed (MPI may write the rest into `out` if the peer resumes).
  void unpost_recv(PostedRecv& r) noexcept override {
    if (r.handle == 0) return;
    MPI_Request& req = posted(r.handle);
    MPI_Cancel(&req);
    MPI_Status st;
    if (!wait_until(req, st, std::chrono::steady_clock::now() + std::min(timeout_, std::chrono::milliseconds(1000))))
      MPI_Request_free(&req);
    release(r);
  }

  /// Waits for `req` (any MPI request on this transport's communicators) until the timeout; a
  /// PeerError naming `what` and `tag` if it does not complete. For collectives built on MPI's own.
  void wait(MPI_Request& req, const char* what, Tag tag) {
    MPI_Status st;
    if (wait_until(req, st, std::chrono::steady_clock::now() + timeout_)) {
      check(st.MPI_ERROR, what);
      return;
    }
    abandon(req);
    throw PeerError("gradsync: " + describe() + ": " + what + " of unit " + std::to_string(tag) +
                    " did not complete within " + std::to_string(timeout_.count()) +
                    " ms: a rank died or stopped taking part");
  }

 private:
  struct AsyncSend {
    MPI_Request request = MPI_REQUEST_NULL;
    int dst = 0;
    Tag tag = 0;
  };

  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw UsageError("gradsync: MPI messages are limited to 2 GiB; use smaller slices");
    return static_cast<int>(n);
  }
  void check_tag(Tag tag) const {
    if (tag > tag_ub_)
      throw UsageError("gradsync: tag " + std::to_string(tag) + " exceeds MPI_TAG_UB " + std::to_string(tag_ub_));
  }
  /// Throws on an MPI error; one in talking to `peer` counts as that peer gone silent
  /// (PeerTimeout), so the ranks settle which rank is gone, as after a timeout.
  void check(int rc, const char* call, int peer = -1) const {
    if (rc == MPI_SUCCESS) return;
    const std::string what = "gradsync: " + describe() + ": " + call + " failed: " + detail::mpi_error(rc);
    if (peer >= 0) throw PeerTimeout(what + " (to rank " + std::to_string(peer) + ")", peer);
    throw PeerError(what);
  }

  /// Waits for `req` until done or `deadline`; true when done (then `st` is its status, with
  /// MPI_ERROR set: an error is reported by received() or the caller's check).
  bool wait_until(MPI_Request& req, MPI_Status& st, std::chrono::steady_clock::time_point deadline) {
    return waits_.wait(req, st, deadline);
  }

  std::size_t received(MPI_Status& st, int src, std::size_t capacity) {
    if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) fail_request(st, src, capacity);
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    return static_cast<std::size_t>(n);
  }
  [[noreturn]] void fail_request(const MPI_Status& st, int peer, std::size_t capacity) {
    int cls = 0;
    MPI_Error_class(st.MPI_ERROR, &cls);
    if (cls == MPI_ERR_TRUNCATE)
      throw WireError("gradsync: " + describe() + " received a message from rank " + std::to_string(peer) +
                      " longer than the expected " + std::to_string(capacity) +
                      " bytes (ranks disagree on layout, slicing or codec)");
    throw PeerTimeout("gradsync: " + describe() + ": communication with rank " + std::to_string(peer) +
                          " failed: " + detail::mpi_error(st.MPI_ERROR),
                      peer);
  }
  /// Gives up on a request after a failure: cancel if possible, never wait.
  static void abandon(MPI_Request& req) {
    if (req == MPI_REQUEST_NULL) return;
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }

  /// Puts `value` in a free slot of `slots` (or a new one at the end) and returns its handle, the
  /// slot's index + 1; the caller holds mutex_.
  template <class Slots, class T>
  static std::uint64_t store(Slots& slots, std::vector<std::size_t>& free, T value) {
    if (free.empty()) {
      slots.push_back(std::move(value));
      return slots.size();
    }
    const std::size_t slot = free.back();
    free.pop_back();
    slots[slot] = std::move(value);
    return slot + 1;
  }
  /// Posted receive `handle`'s request: only its caller touches it, and posted_ never moves it.
  MPI_Request& posted(std::uint64_t handle) {
    std::lock_guard lock(mutex_);
    return posted_.at(handle - 1);
  }
  void release(PostedRecv& r) {
    std::lock_guard lock(mutex_);
    free_posted_.push_back(r.handle - 1);
    r.handle = 0;
  }

  MPI_Comm p2p_ = MPI_COMM_NULL, coll_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Tag tag_ub_ = 0;
  std::chrono::milliseconds timeout_;
  detail::MpiWaits waits_;
  detail::MpiBufferedSends sends_;
  std::mutex mutex_;  // guards async_, free_async_, posted_ and free_posted_
  std::vector<AsyncSend> async_;        // send_async's requests; SendId = index + 1
  std::vector<std::size_t> free_async_;  // their free slots
  std::deque<MPI_Request> posted_;        // post_recv's requests; handle = index + 1
  std::vector<std::size_t> free_posted_;  // their free slots
};

}  // namespace gradsync::transport
