// Two in-process ranks average a gradient through the installed headers.
#include <cstdio>
#include <thread>
#include <vector>

#include <gradsync/gradsync.hpp>

int main() {
  gradsync::transport::InProcessGroup group(2);
  std::vector<float> g0(5, 1.0f), g1(5, 3.0f);
  auto rank = [&](int r, std::vector<float>& g) {
    gradsync::AnySynchronizer sync(group.rank(r), gradsync::ModelLayout{{"w", 5}});
    sync.gradient_ready(0, g);
    sync.finish_iteration();
    sync.wait_all();
  };
  {
    std::jthread a(rank, 0, std::ref(g0)), b(rank, 1, std::ref(g1));
  }
  std::printf("mean %.1f %.1f\n", g0[0], g1[4]);
  return g0[0] == 2.0f && g1[4] == 2.0f ? 0 : 1;
}
