// The CPU cost of a received byte on transport::Mpi's receive paths. Two ranks exchange messages
// of one size as a ring step does (each sends to the other with send_async, then receives); each
// rank's CPU time (user + system, getrusage) and the wall time, per GB received:
//   probe:  recv_for, which polls MPI_Improbe and receives a message once it is there (the path of
//           callers that poll with short waits; Open MPI holds an eager message that arrives
//           before its receive as unexpected, and copies it again when it is received);
//   posted: recv, which posts MPI_Irecv when the receiver starts waiting (the data path);
//   early:  post_recv before the send, the next step's receive posted while this one completes.
//
//   mpirun -np 2 [--mca btl self,tcp ...] bench_mpi_receive BYTES REPETITIONS MODE
// prints one JSON line (rank 0): mode, bytes, repetitions, cpu_s_per_gb (mean over ranks), wall_s_per_gb.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <gradsync/transport/mpi.hpp>

namespace {
using namespace gradsync::transport;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// One exchange per repetition, receiving into two buffers in turn.
void exchange(Mpi& t, const std::string& mode, std::size_t bytes, int repetitions) {
  const int peer = 1 - t.rank();
  const std::vector<std::byte> out(bytes, std::byte{1});
  std::vector<std::byte> in[2] = {std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)};
  PostedRecv next;
  if (mode == "early") next = t.post_recv(peer, 0, in[0]);
  for (int i = 0; i < repetitions; ++i) {
    const Transport::SendId sent = t.send_async(peer, 0, out);
    std::size_t got = 0;
    if (mode == "probe") {
      got = t.recv_for(peer, 0, in[i % 2], t.timeout()).value_or(0);
    } else if (mode == "posted") {
      got = t.recv(peer, 0, in[i % 2]);
    } else {
      PostedRecv now = next;
      if (i + 1 < repetitions) next = t.post_recv(peer, 0, in[(i + 1) % 2]);
      got = t.wait_recv(now, t.timeout()).value_or(0);
    }
    if (got != bytes) throw std::runtime_error("a message went missing or was cut short");
    t.wait_sent(sent);
  }
}
}  // namespace

int main(int argc, char** argv) {
  MpiSession session(argc, argv);
  return session.run([&] {
    if (argc != 4) throw gradsync::UsageError("usage: bench_mpi_receive BYTES REPETITIONS probe|posted|early");
    const std::size_t bytes = std::stoul(argv[1]);
    const int repetitions = std::stoi(argv[2]);
    const std::string mode = argv[3];
    if (mode != "probe" && mode != "posted" && mode != "early")
      throw gradsync::UsageError("bench_mpi_receive: the mode is probe, posted or early, not '" + mode + "'");
    Mpi t(MPI_COMM_WORLD, std::chrono::seconds(60));
    if (t.size() != 2) throw gradsync::UsageError("bench_mpi_receive runs on 2 ranks");
    MPI_Barrier(MPI_COMM_WORLD);
    const double cpu0 = cpu_seconds();
    const auto wall0 = std::chrono::steady_clock::now();
    exchange(t, mode, bytes, repetitions);
    double mine[2] = {cpu_seconds() - cpu0, std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()};
    double sum[2] = {0, 0};
    MPI_Reduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    const double gb = double(bytes) * repetitions / 1e9;
    if (t.rank() == 0)
      std::printf("{\"mode\": \"%s\", \"bytes\": %zu, \"repetitions\": %d, \"cpu_s_per_gb\": %.4f, \"wall_s_per_gb\": %.4f}\n",
                  mode.c_str(), bytes, repetitions, sum[0] / 2 / gb, sum[1] / 2 / gb);
  });
}
