// Algorithm bandwidth (bytes of the unit / time of one all-reduce) of each collective x codec
// next to Open MPI's MPI_Allreduce, in one run under mpirun; rank 0 prints the report.
//
//   mpirun --allow-run-as-root --oversubscribe -np 4 build/default/benchmarks/collective/bench_collective
//   ... bench_collective --codecs=fp32,fp16,qsgd8 --link=1gbit --benchmark_filter=/67108864/
//
// Names: <collective>/<codec>/<bytes> ("ring/fp32/67108864"), "mpi_allreduce/fp32/<bytes>" for
// the plain MPI_Allreduce baseline; with --link=L every collective runs over Throttled<Mpi> and
// names start with "L/" (MPI's own all-reduce cannot be throttled and is left out). Each
// iteration's time is the slowest rank's, between barriers; iteration counts are fixed per size
// so every rank runs the same number of collectives. --codecs defaults to every codec this build
// knows; --collectives to all.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include <gradsync/gradsync.hpp>

namespace gs = gradsync;

namespace {

struct Config {
  std::vector<std::string> codecs, collectives;
  std::optional<gs::transport::Link> link;
  std::string link_name;
  bool color = true;    // --benchmark_color=false|no (mpirun's output is a pty: isatty cannot tell)
  bool console = true;  // no --benchmark_format other than console: print plain names
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// Takes --codecs=, --collectives= and --link= out of argv (the rest is Google Benchmark's).
Config parse_args(int& argc, char** argv) {
  Config c;
  c.collectives = {"mpi_allreduce", "mpi", "ring", "reduce-broadcast", "hierarchical:2", "hybrid", "ps"};
  for (const char* name : {"fp32", "fp16", "bf16", "qsgd8", "onebit"}) try {
      gs::codec::AnyCodec::parse(name);
      c.codecs.emplace_back(name);
    } catch (const gs::ConfigError&) {
    }
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.starts_with("--codecs=")) c.codecs = split(a.substr(9));
    else if (a.starts_with("--collectives=")) c.collectives = split(a.substr(14));
    else if (a.starts_with("--link=")) c.link = gs::transport::Link::parse(c.link_name = a.substr(7));
    else argv[kept++] = argv[i];
    if (a == "--benchmark_color=false" || a == "--benchmark_color=no") c.color = false;
    if (a.starts_with("--benchmark_format=") && a != "--benchmark_format=console") c.console = false;
  }
  argc = kept;
  return c;
}

/// Buffers shared by all benchmarks (sized for the largest), so runs do not allocate.
struct Buffers {
  std::vector<float> data;
  gs::collective::Workspace ws;
};

double slowest_rank(double seconds) {
  double max = 0;
  MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

/// The console report with names as registered ("ring/fp32/67108864"), without the
/// "/iterations:N/manual_time" that Google Benchmark appends.
class PlainNames : public benchmark::ConsoleReporter {
 public:
  explicit PlainNames(bool color) : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> plain = runs;
    for (Run& r : plain) {
      r.run_name.iterations.clear();
      r.run_name.time_type.clear();
    }
    ConsoleReporter::ReportRuns(plain);
  }
};

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  gs::transport::MpiSession mpi(argc, argv);
  return mpi.run([&] {
    const Config cfg = parse_args(argc, argv);
    benchmark::Initialize(&argc, argv);
    gs::transport::Mpi transport(MPI_COMM_WORLD, std::chrono::seconds(120));
    std::unique_ptr<gs::transport::Throttled<gs::transport::Mpi>> throttled;
    if (cfg.link) throttled = std::make_unique<gs::transport::Throttled<gs::transport::Mpi>>(transport, *cfg.link);
    gs::transport::Transport& t = throttled ? static_cast<gs::transport::Transport&>(*throttled) : transport;

    constexpr std::size_t min_bytes = 4u << 10, max_bytes = 256u << 20;
    auto buffers = std::make_shared<Buffers>();
    buffers->data.resize(max_bytes / sizeof(float));
    std::size_t ws_bytes = 0;
    for (const auto& c : cfg.codecs) ws_bytes = std::max(ws_bytes, gs::codec::AnyCodec::parse(c).encoded_bytes(buffers->data.size()));
    buffers->ws.send.resize(ws_bytes);
    buffers->ws.recv.resize(ws_bytes);

    // about 1 s of traffic per benchmark at the expected rate, at least 3 iterations
    const double rate = cfg.link ? cfg.link->gbit * 1e9 / 8 : 1e9;
    // size-major order: the collectives of one size run back to back, so drifting load on a
    // shared machine affects them alike
    for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4)
      for (const std::string& codec_name : cfg.codecs)
        for (const std::string& coll_name : cfg.collectives) {
          const gs::codec::AnyCodec codec = gs::codec::AnyCodec::parse(codec_name);
          const bool mpi_only = coll_name == "mpi_allreduce" || coll_name == "mpi";
          if (mpi_only && (cfg.link || !codec.traits().lossless)) continue;
          std::optional<gs::collective::AnyCollective> coll;
          if (coll_name != "mpi_allreduce") coll = gs::collective::AnyCollective::parse(coll_name);
          const std::string name =
              (cfg.link ? cfg.link_name + "/" : "") + coll_name + "/" + codec_name + "/" + std::to_string(bytes);
          const auto iterations = static_cast<benchmark::IterationCount>(
              std::clamp(rate / static_cast<double>(bytes), 3.0, 2000.0));
          benchmark::RegisterBenchmark(name.c_str(), [=, &t](benchmark::State& state) {
            const std::span<float> data = std::span(buffers->data).first(bytes / sizeof(float));
            std::fill(data.begin(), data.end(), static_cast<float>(t.rank() + 1));
            gs::collective::Job job{data, 1};
            auto once = [&] {
              if (coll) coll->run(t, codec, job, buffers->ws);
              else MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            };
            once();  // warm-up: buffer pools, MPI connections
            for (auto _ : state) {
              MPI_Barrier(MPI_COMM_WORLD);
              const double t0 = MPI_Wtime();
              once();
              state.SetIterationTime(slowest_rank(MPI_Wtime() - t0));
            }
            state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
          })->UseManualTime()->Iterations(iterations)->Unit(benchmark::kMillisecond);
        }
    if (t.rank() == 0) {
      PlainNames report(cfg.color);
      if (cfg.console) benchmark::RunSpecifiedBenchmarks(&report);
      else benchmark::RunSpecifiedBenchmarks();
    } else {
      NullReporter quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
  });
}
