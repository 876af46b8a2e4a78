// Failure behaviour over MPI, run by expect_failure.cmake (which checks exit status, messages and
// time). Modes:
//   mismatch  the last rank builds a different model: every rank fails with the handshake message
//   hang      the last rank stops answering in iteration 1: the others fail after the timeout
//   kill      the last rank is killed (SIGKILL) in the middle of iteration 1's backward pass
#include <csignal>
#include <cstring>
#include <thread>

#include <gradsync/gradsync.hpp>

#include "support/ranks.hpp"

using namespace gradsync;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  transport::MpiSession mpi(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  return mpi.run(
      [&] {
        transport::Mpi t(MPI_COMM_WORLD, 2s);
        const bool odd_one = t.rank() == t.size() - 1;
        ModelLayout layout = testing::uneven_layout();
        if (mode == "mismatch" && odd_one) layout = ModelLayout{{"conv1.weight", 1728}, {"fc.weight", 2570}};
        else if (mode != "mismatch" && mode != "hang" && mode != "kill")
          throw UsageError("usage: mpi_failure mismatch|hang|kill");
        // Options::timeout is the one timeout of every wait the synchronizer makes
        AnySynchronizer sync(t, layout, {"fixed:1000", "forward", "fp32", "ring"}, Options{.timeout = 2s});
        std::vector<std::vector<float>> grads(layout.num_layers());
        for (int it = 0; it < 3; ++it) {
          for (std::size_t l = 0; l < grads.size(); ++l) sync.wait_for(l);
          for (std::size_t l = grads.size(); l-- > 0;) {
            if (it == 1 && odd_one && l == grads.size() / 2) {
              if (mode == "kill") std::raise(SIGKILL);
              if (mode == "hang") std::this_thread::sleep_for(60s);  // mpirun ends it when the others give up
            }
            grads[l].assign(layout.layer(l).elements, testing::grad_value(t.rank(), l, it, 0));
            sync.gradient_ready(l, grads[l]);
          }
          sync.finish_iteration();
        }
        sync.wait_all();
      },
      2s);
}
