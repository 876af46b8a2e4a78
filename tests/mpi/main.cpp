// Catch2 under MPI: every rank runs every test case in the same order (test cases are collective);
// the job fails if any rank failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <gradsync/transport/mpi.hpp>

int main(int argc, char** argv) {
  gradsync::transport::MpiSession mpi(argc, argv);
  int failed = Catch::Session().run(argc, argv);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
