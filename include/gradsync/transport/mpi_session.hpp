#pragma once
/// MpiSession: RAII for MPI itself — MPI_Init_thread with MPI_THREAD_MULTIPLE (which gradsync's
/// threads need), MPI_Finalize at the end, and a `run` that turns an exception into a message on
/// stderr and a non-zero exit instead of a hang when a peer is gone.
///
/// \code
///   int main(int argc, char** argv) {
///     gradsync::transport::MpiSession mpi(argc, argv);
///     return mpi.run([&] { /* build a transport::Mpi, train */ });
///   }
/// \endcode
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "../core/error.hpp"
#include "sigpipe.hpp"

namespace gradsync::transport {

namespace detail {
inline std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

}  // namespace detail

/// Settings gradsync's traffic needs over TCP, applied by MpiSession before MPI_Init_thread as
/// defaults (what the user set first wins):
///  - Open MPI's btl_tcp_eager_limit / btl_tcp_max_send_size 1 MiB + 64, unless an OMPI_MCA_
///    variable (e.g. from `mpirun --mca NAME VALUE`) sets them: a ring segment (P3: 80 kB per
///    slice and peer; 1 MiB at most, collective::Ring::segment_bytes) goes in one eager message.
///    Above Open MPI's default of 64 kB a message is a rendezvous: its data follows only after
///    the receiver's answer reaches the sender, and MPI answers only inside an MPI call of the
///    receiver and moves the data only inside one of the sender, i.e. when gradsync's polling
///    threads wake: two wake-ups per message, with the link idle meanwhile.
///  - SIGPIPE ignored, unless the program handles it (sigpipe.hpp): a write to the socket of a
///    peer that died then fails with EPIPE, which MPI reports. Survivors killed by it made the
///    others name them instead of the rank that died.
/// Returns what it set, "NAME=VALUE ..." (empty when nothing).
inline std::string apply_mpi_defaults() {
  std::string applied;
  const auto note = [&](const std::string& what) { applied += (applied.empty() ? "" : " ") + what; };
#if defined(OPEN_MPI) && OPEN_MPI
  static constexpr const char* defaults[][2] = {{"OMPI_MCA_btl_tcp_eager_limit", "1048640"},
                                                {"OMPI_MCA_btl_tcp_max_send_size", "1048640"}};
  for (const auto& [name, value] : defaults)
    if (!std::getenv(name) && ::setenv(name, value, 0) == 0) note(std::string(name) + "=" + value);
#endif
  if (ignore_sigpipe_if_default()) note("SIGPIPE=SIG_IGN");
  return applied;
}

/// RAII for MPI itself: MPI_Init_thread with MPI_THREAD_MULTIPLE, MPI_Finalize at the end, with
/// gradsync's Open MPI defaults (apply_mpi_defaults).
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv) { init(&argc, &argv); }
  MpiSession() { init(nullptr, nullptr); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() { finalize(); }

  /// Runs `body`; on an exception prints "gradsync rank R of N: <what>" to stderr and returns 1.
  /// MPI_Finalize then gets `grace` to complete (it waits for every rank); if a peer is dead or
  /// hung, the process exits with code 1 instead of hanging, and mpirun stops the whole job.
  template <class F>
  int run(F&& body, std::chrono::milliseconds grace = std::chrono::seconds(5)) {
    try {
      body();
      return 0;
    } catch (const std::exception& e) {
      report(e.what());
    } catch (...) {
      report("unknown exception");
    }
    finalize_within(grace, 1);
    return 1;
  }

  /// Finalizes MPI, or exits the process with `code` if that takes longer than `grace`.
  void finalize_within(std::chrono::milliseconds grace, int code) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock lock(m);
      if (!cv.wait_for(lock, grace, [&] { return done; })) {
        std::fprintf(stderr, "gradsync: MPI_Finalize did not complete within %lld ms (a peer is gone); exiting\n",
                     static_cast<long long>(grace.count()));
        std::fflush(stderr);
        std::_Exit(code);
      }
    });
    finalize();
    {
      std::lock_guard lock(m);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  }

 private:
  void init(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw UsageError("gradsync: MpiSession: MPI is already initialized; create one MpiSession only");
    apply_mpi_defaults();
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw PeerError("gradsync: MPI_Init_thread failed; start the program with mpirun/mpiexec");
    owner_ = true;
    if (provided < MPI_THREAD_MULTIPLE) {
      finalize();
      throw UsageError("gradsync: this MPI library does not grant MPI_THREAD_MULTIPLE (got level " +
                       std::to_string(provided) +
                       "); gradsync's threads call MPI concurrently: use an MPI built with thread support "
                       "(Debian's Open MPI is)");
    }
  }
  void finalize() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owner_ && !finalized) MPI_Finalize();
    owner_ = false;
  }
  static void report(const char* what) {
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::fprintf(stderr, "gradsync rank %d of %d: %s\n", rank, size, what);
    std::fflush(stderr);
  }
  bool owner_ = false;
};

}  // namespace gradsync::transport
