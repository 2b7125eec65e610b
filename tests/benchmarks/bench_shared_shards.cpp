// The node's sharding cost without the cluster (issue 16): one CPU engine over a whole shard
// against N engines over its N shards (`gpusearch partition`) sharing their queries' thresholds
// and unions as a node's ISNs do (isn/shared_thresholds.hpp: slot and union lines per query and
// phase, the collection's combined K-th impact seeds), in one process: no MPI, no wire. The
// shards run in turn (one after another: deterministic, for callgrind's instruction counts) or at
// once (each on its own oneTBB arena of threads / N, as the ISNs of a 16-core node run), or at
// once in lockstep (every shard starts a batch when all have ended the one before: the ISNs of
// a node receive a batch together when the aggregator admits just in time), or at once in
// processes of their own (`processes`, `processes-lockstep`: each shard's engine in a child
// process of this program, as the ISNs of a node run, their slots in a shared-memory file; the
// sharing and the lockstep are the same, only the process boundary is added; `at-once-shm`
// and `lockstep-shm` keep one process but put the slots in such a file). Queries
// go in batches, as the ISN hands them to the engine (CpuEngine::search with slots: every AND
// phase of the batch, then the OR phases). Every merged answer is checked against the whole
// shard's.
//
//   bench_shared_shards --whole DIR --sharded DIR --queries FILE [--limit Q] [--mode and-or]
//                       [--k 10] [--batch 1024] [--threads T]
//                       [--configs whole,in-turn,at-once,lockstep,at-once-shm,lockstep-shm,
//                                  processes,processes-lockstep]
//                       [--in-order on|off]
//                       [--reps R] [--out JSON]
//
// Under callgrind: --threads 1 --configs whole (or in-turn), --toggle-collect='*run_config*'.
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <tbb/task_arena.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/kth_impact_table.hpp"
#include "common/result_compare.hpp"
#include "common/shard_index.hpp"
#include "common/wire/wire.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"
#include "isn/shared_thresholds.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

// Page faults that needed no I/O (a mapped page's first touch by this process), this process.
std::uint64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::uint64_t(u.ru_minflt);
}

// Touches every page of the shard's mapped arrays that the engines read, so that no config's
// timed part takes their first-touch faults: the in-process configs share one mapping (only
// the first config to run would pay), each child process maps the files anew.
void prefault(const ShardIndex& shard) {
  const auto touch = [](auto span) {  // volatile reads: not optimized away
    const auto* bytes = reinterpret_cast<const volatile unsigned char*>(span.data());
    for (std::size_t i = 0; i < span.size_bytes(); i += 4096) (void)bytes[i];
  };
  touch(shard.postings());
  touch(shard.block_last_docid());
  touch(shard.block_max_impact());
  touch(shard.block_offsets());
  touch(shard.doc_lengths());
  touch(shard.pagerank());
  touch(shard.global_scores());
  touch(shard.global_ranks());
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The slot pairs of every query, laid out as the ISNs' window lays out one batch's
// (SharedThresholdWindow: per phase the slot in a line of its own, its union in the next two).
struct SlotArena {
  static constexpr std::size_t kWordsPerPhase = SharedThresholdWindow::kWordsPerPhase;
  static constexpr std::size_t kSlotWords = SharedThresholdWindow::kSlotWords;
  static std::size_t words_for(std::size_t queries) { return queries * 2 * kWordsPerPhase; }
  std::unique_ptr<std::uint64_t[]> storage;
  std::uint64_t* words = nullptr;
  std::vector<cpu::QueryThresholdSlots> slots;
  explicit SlotArena(std::size_t queries) {
    storage.reset(new std::uint64_t[words_for(queries) + 8]());
    lay_out(reinterpret_cast<std::uint64_t*>(
                (reinterpret_cast<std::uintptr_t>(storage.get()) + 63) & ~std::uintptr_t(63)),
            queries);
  }
  // Over `zeroed` (64-byte aligned, words_for(queries) words): another process's slots too.
  SlotArena(std::uint64_t* zeroed, std::size_t queries) { lay_out(zeroed, queries); }

 private:
  void lay_out(std::uint64_t* w0, std::size_t queries) {
    words = w0;
    slots.resize(queries);
    for (std::size_t q = 0; q < queries; ++q) {
      auto phase = [&](std::size_t p) {
        std::uint64_t* w = words + (2 * q + p) * kWordsPerPhase;
        return cpu::ThresholdSlot(w, 1, w + kSlotWords, cpu::ThresholdSlot::kUnionCapacity);
      };
      slots[q] = {phase(0), phase(1)};
    }
  }
};

// The processes configs' shared memory (a memfd the children inherit): two process-shared
// barriers in the first page, then the slots of every query.
class SharedRegion {
 public:
  static constexpr std::size_t kHeaderBytes = 4096;
  // The parent's: zeroed, the barriers for `shards` children.
  SharedRegion(std::size_t slot_words, unsigned shards) {
    fd_ = memfd_create("bench_shared_shards", 0);  // no MFD_CLOEXEC: the children inherit it
    if (fd_ < 0) throw Error(std::string("memfd_create: ") + std::strerror(errno));
    bytes_ = kHeaderBytes + slot_words * sizeof(std::uint64_t);
    if (ftruncate(fd_, off_t(bytes_)) != 0) {
      close(fd_);
      throw Error(std::string("ftruncate of the shared slots: ") + std::strerror(errno));
    }
    map();
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(start(), &attr, shards);
    pthread_barrier_init(batch(), &attr, shards);
    pthread_barrierattr_destroy(&attr);
    owner_ = true;
  }
  // A child's: the parent's region through the inherited descriptor.
  explicit SharedRegion(int fd) : fd_(fd) {
    const off_t end = lseek(fd_, 0, SEEK_END);
    if (end < off_t(kHeaderBytes)) throw Error("--child-fd: not the parent's shared slots");
    bytes_ = std::size_t(end);
    map();
  }
  ~SharedRegion() {
    if (owner_) {
      pthread_barrier_destroy(start());
      pthread_barrier_destroy(batch());
    }
    munmap(base_, bytes_);
    if (owner_) close(fd_);
  }
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  int fd() const { return fd_; }
  pthread_barrier_t* start() { return reinterpret_cast<pthread_barrier_t*>(base_); }
  pthread_barrier_t* batch() { return reinterpret_cast<pthread_barrier_t*>(base_ + 256); }
  std::uint64_t* slot_words() { return reinterpret_cast<std::uint64_t*>(base_ + kHeaderBytes); }

 private:
  void map() {
    void* m = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) {
      if (owner_) close(fd_);
      throw Error(std::string("mmap of the shared slots: ") + std::strerror(errno));
    }
    base_ = static_cast<std::byte*>(m);
  }
  int fd_ = -1;
  std::size_t bytes_ = 0;
  std::byte* base_ = nullptr;
  bool owner_ = false;
};

struct ConfigRun {
  std::string config;
  double seconds = 0, cpu_seconds = 0;
  std::uint64_t minor_faults = 0;  // in the timed part: pages' first touches (heap or mapped)
  QueryCounters work;
  std::vector<std::vector<ShardResult>> by_shard;  // [shard][query]
};

// One engine per shard of `index`, batch by batch over `queries`.
ConfigRun run_config(const std::string& config, const Index& index,
                     std::vector<std::unique_ptr<cpu::CpuEngine>>& engines,
                     const std::vector<Query>& queries, const SearchParams& p, std::size_t batch,
                     unsigned threads) {
  ConfigRun r;
  r.config = config;
  const std::size_t shards = engines.size();
  r.by_shard.assign(shards, std::vector<ShardResult>(queries.size()));
  // *-shm: the slots in a shared memfd, as the processes configs' (not the heap's pages).
  const bool shm = config.ends_with("-shm");
  std::optional<SharedRegion> region;
  if (shm) region.emplace(SlotArena::words_for(queries.size()), 1u);
  std::optional<SlotArena> arena_storage;
  if (shm)
    arena_storage.emplace(region->slot_words(), queries.size());
  else
    arena_storage.emplace(shards > 1 ? queries.size() : 0);
  SlotArena& arena = *arena_storage;
  const auto search = [&](std::size_t s, std::size_t from, std::size_t n) {
    std::span<const Query> qs(queries.data() + from, n);
    std::span<ShardResult> out(r.by_shard[s].data() + from, n);
    if (shards > 1)
      engines[s]->search(qs, p, out,
                         std::span<const cpu::QueryThresholdSlots>(arena.slots.data() + from, n));
    else
      engines[s]->search(qs, p, out);
  };
  const auto t0 = Clock::now();
  const double c0 = process_cpu_seconds();
  const std::uint64_t f0 = minor_faults();
  const bool lockstep = config.starts_with("lockstep");
  if (config.starts_with("at-once") || lockstep) {
    std::barrier batch_done{std::ptrdiff_t(shards)};
    std::vector<std::thread> workers;
    for (std::size_t s = 0; s < shards; ++s)
      workers.emplace_back([&, s] {
        tbb::task_arena a{int(std::max<unsigned>(1, threads / unsigned(shards)))};
        a.execute([&] {
          for (std::size_t from = 0; from < queries.size(); from += batch) {
            search(s, from, std::min(batch, queries.size() - from));
            if (lockstep) batch_done.arrive_and_wait();
          }
        });
      });
    for (auto& w : workers) w.join();
  } else {
    tbb::task_arena a{int(threads)};
    a.execute([&] {
      for (std::size_t from = 0; from < queries.size(); from += batch)
        for (std::size_t s = 0; s < shards; ++s)
          search(s, from, std::min(batch, queries.size() - from));
    });
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - c0;
  r.minor_faults = minor_faults() - f0;
  for (const auto& shard : r.by_shard)
    for (const ShardResult& x : shard) r.work.add(x.counters);
  (void)index;
  return r;
}

std::uint64_t monotonic_ns() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           Clock::now().time_since_epoch())
                           .count());
}

struct ChildOptions {
  int shard = -1;  // >= 0: this process is a child running that shard
  int fd = -1;
  bool lockstep = false;
  std::filesystem::path out;
};

// A child of the processes configs: its shard's batches on threads / shards threads, sharing
// slots with its siblings through the parent's region; then its timing and every batch's
// results, packed as an ISN packs them (no external ids), into `out`.
void run_child(const ChildOptions& c, cpu::CpuEngine& engine, const ShardIndex& engine_shard,
               std::size_t shards,
               const std::vector<Query>& queries, const SearchParams& p, std::size_t batch,
               unsigned threads) {
  SharedRegion region(c.fd);
  SlotArena arena(region.slot_words(), queries.size());
  prefault(engine_shard);
  std::vector<ShardResult> results(queries.size());
  tbb::task_arena a{int(std::max<unsigned>(1, threads / unsigned(shards)))};
  pthread_barrier_wait(region.start());
  const std::uint64_t start_ns = monotonic_ns();
  const double c0 = process_cpu_seconds();
  const std::uint64_t f0 = minor_faults();
  a.execute([&] {
    for (std::size_t from = 0; from < queries.size(); from += batch) {
      const std::size_t n = std::min(batch, queries.size() - from);
      engine.search(std::span<const Query>(queries.data() + from, n), p,
                    std::span<ShardResult>(results.data() + from, n),
                    std::span<const cpu::QueryThresholdSlots>(arena.slots.data() + from, n));
      if (c.lockstep) pthread_barrier_wait(region.batch());
    }
  });
  const std::uint64_t end_ns = monotonic_ns();
  const double cpu_seconds = process_cpu_seconds() - c0;
  const std::uint64_t faults = minor_faults() - f0;
  std::ofstream out(c.out, std::ios::binary);
  const std::uint64_t head[4] = {start_ns, end_ns, std::uint64_t(std::llround(cpu_seconds * 1e9)),
                                 faults};
  out.write(reinterpret_cast<const char*>(head), sizeof head);
  for (std::size_t from = 0, id = 0; from < queries.size(); from += batch, ++id) {
    wire::ResultHeader h;
    h.batch_id = id;
    const auto bytes =
        wire::encode_results(h,
                             std::span<const ShardResult>(results.data() + from,
                                                          std::min(batch, queries.size() - from)),
                             [](DocId) { return std::string_view(); })
            .flat();
    const std::uint64_t words = bytes.size();
    out.write(reinterpret_cast<const char*>(&words), sizeof words);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(words * 8));
  }
  if (!out.flush()) throw Error("cannot write " + c.out.string());
}

// The processes configs: one child per shard (this program again, --child-shard), the parent
// only waits. Time: the first child's start to the last one's end (one clock for all).
ConfigRun run_processes(const std::string& config, const std::vector<std::string>& self_args,
                        std::size_t shards, std::size_t num_queries) {
  ConfigRun r;
  r.config = config;
  SharedRegion region(SlotArena::words_for(num_queries), unsigned(shards));
  char dir_template[] = "/tmp/bench_shared_shards-XXXXXX";
  if (!mkdtemp(dir_template)) throw Error(std::string("mkdtemp: ") + std::strerror(errno));
  const std::filesystem::path dir = dir_template;
  struct RemovedAtExit {  // the children's result files, on every way out
    std::filesystem::path dir;
    ~RemovedAtExit() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } removed_at_exit{dir};
  std::vector<pid_t> pids;
  const auto stop_children = [&] {
    for (pid_t pid : pids)
      if (pid > 0) kill(pid, SIGKILL);
    for (pid_t pid : pids)
      if (pid > 0) waitpid(pid, nullptr, 0);
  };
  for (std::size_t s = 0; s < shards; ++s) {
    std::vector<std::string> args = self_args;
    for (const std::string& a : {std::string("--child-shard"), std::to_string(s),
                                 std::string("--child-fd"), std::to_string(region.fd()),
                                 std::string("--child-lockstep"),
                                 std::string(config == "processes-lockstep" ? "on" : "off"),
                                 std::string("--child-out"),
                                 (dir / fmt::format("shard{}.bin", s)).string()})
      args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (const int e = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ)) {
      stop_children();
      throw Error(std::string("cannot start a shard's process: ") + std::strerror(e));
    }
    pids.push_back(pid);
  }
  // A child that fails leaves its siblings at a barrier: they are stopped.
  for (std::size_t left = shards; left > 0;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) {
      const int e = errno;
      stop_children();
      throw Error(std::string("waiting for the shards' processes: ") + std::strerror(e));
    }
    const auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) continue;  // not one of ours
    *it = -1;
    --left;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      stop_children();
      throw Error(fmt::format("a shard's process (pid {}) failed: {}", pid,
                              WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status))));
    }
  }
  std::uint64_t first_start = ~std::uint64_t(0), last_end = 0;
  r.by_shard.assign(shards, std::vector<ShardResult>(num_queries));
  for (std::size_t s = 0; s < shards; ++s) {
    const auto path = dir / fmt::format("shard{}.bin", s);
    std::ifstream in(path, std::ios::binary);
    std::uint64_t head[4] = {};
    if (!in.read(reinterpret_cast<char*>(head), sizeof head))
      throw Error(path.string() + ": truncated");
    first_start = std::min(first_start, head[0]);
    last_end = std::max(last_end, head[1]);
    r.cpu_seconds += 1e-9 * double(head[2]);
    r.minor_faults += head[3];
    std::size_t q = 0;
    for (std::uint64_t words = 0; q < num_queries && in.read(reinterpret_cast<char*>(&words), 8);) {
      wire::WireBytes bytes(words);
      if (!in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(words * 8)))
        throw Error(path.string() + ": truncated");
      wire::ResultBatch b = wire::decode_result_batch(std::as_bytes(std::span(bytes)));
      for (wire::ShardAnswer& a : b.answers) r.by_shard[s].at(q++) = std::move(a.result);
    }
    if (q != num_queries)
      throw Error(fmt::format("{}: {} of {} queries' results", path.string(), q, num_queries));
  }
  r.seconds = 1e-9 * double(last_end - first_start);
  for (const auto& shard : r.by_shard)
    for (const ShardResult& x : shard) r.work.add(x.counters);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One engine on a whole shard against N sharing engines on its shards, in process"};
  std::filesystem::path whole_dir, sharded_dir, queries_path, out_path;
  std::size_t limit = 20000, k = 10, batch = 1024;
  unsigned threads = 0, reps = 1;
  std::string mode_arg = "and-or", configs_arg = "whole,in-turn,at-once";
  bool in_order = false;
  app.add_option("--whole", whole_dir, "the whole index (one shard)")->required();
  app.add_option("--sharded", sharded_dir, "the same index split into N shards")->required();
  app.add_option("--queries", queries_path, "queries (TSV or TREC topics)")->required();
  app.add_option("--limit", limit, "queries used")->capture_default_str();
  app.add_option("--mode", mode_arg, "and, or, and-or")->capture_default_str();
  app.add_option("--k", k, "answers per query")->capture_default_str();
  app.add_option("--batch", batch, "queries per engine call")->capture_default_str();
  app.add_option("--threads", threads, "threads in all (0: every core)")->capture_default_str();
  app.add_option("--configs", configs_arg,
                 "whole, in-turn, at-once, lockstep, at-once-shm, lockstep-shm, processes, "
                 "processes-lockstep")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--in-order", [&in_order](const std::string& s) { in_order = s == "on"; },
         "the sharing engines' threads take a batch's queries in batch order (the ISN's "
         "--share-in-order; off: oneTBB's recursive split)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("off");
  app.add_option("--reps", reps, "repetitions of each config")->capture_default_str();
  app.add_option("--out", out_path, "JSON output");
  // The processes configs start this program once per shard with these (not for users).
  ChildOptions child;
  app.add_option("--child-shard", child.shard)->group("");
  app.add_option("--child-fd", child.fd)->group("");
  app.add_option("--child-out", child.out)->group("");
  app.add_option_function<std::string>(
         "--child-lockstep", [&child](const std::string& v) { child.lockstep = v == "on"; })
      ->group("");
  const std::vector<std::string> self_args(argv, argv + argc);
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    const Index whole = Index::open(whole_dir);
    const Index sharded = Index::open(sharded_dir);
    if (whole.num_open_shards() != 1)
      throw InputError(whole_dir.string(), 0, "--whole needs an index of one shard");
    // The queries' term ids are resolved once, on the whole shard: every shard must share its
    // vocabulary (`gpusearch partition` of that index).
    const std::string vocabulary =
        wire::vocabulary_fingerprint(whole.shard(0).manifest(), whole.shard(0).num_terms());
    for (std::size_t s = 0; s < sharded.num_open_shards(); ++s)
      if (wire::vocabulary_fingerprint(sharded.shard(s).manifest(), sharded.shard(s).num_terms()) !=
          vocabulary)
        throw InputError(sharded_dir.string(), 0,
                         fmt::format("shard {} does not share the vocabulary of {} (not a "
                                     "partition of it: gpusearch partition --index {})",
                                     sharded.shard_id(s), whole_dir.string(), whole_dir.string()));
    const std::vector<Query> queries = read_known_queries(whole.shard(0), queries_path, limit);
    if (queries.empty()) throw Error("no query with a known term");
    SearchParams p;
    p.mode = parse_mode(mode_arg);
    p.k = k;
    p.alpha = whole.params().gs_alpha;

    std::vector<std::unique_ptr<cpu::CpuEngine>> whole_engine, shard_engines;
    std::vector<const KthImpactTable*> tables;
    for (std::size_t s = 0; s < sharded.num_open_shards(); ++s) {
      cpu::CpuEngineOptions options;
      options.sharing_in_batch_order = in_order;
      shard_engines.push_back(
          std::make_unique<cpu::CpuEngine>(sharded.shard(s), sharded.shard_id(s), options));
      tables.push_back(shard_engines.back()->kth_impacts());
    }
    // The node's ISNs seed from their tables combined (SharedThresholdWindow::combine_seed_tables).
    if (std::all_of(tables.begin(), tables.end(), [](const KthImpactTable* t) { return t; })) {
      auto combined = std::make_shared<const KthImpactTable>(KthImpactTable::combine(tables));
      for (auto& e : shard_engines) e->set_collection_seeds(combined);
    }
    if (child.shard >= 0) {
      if (std::size_t(child.shard) >= shard_engines.size() || child.fd < 0 || child.out.empty())
        throw Error("--child-shard, --child-fd and --child-out come from the processes configs");
      run_child(child, *shard_engines[std::size_t(child.shard)],
                sharded.shard(std::size_t(child.shard)), shard_engines.size(), queries, p, batch,
                threads);
      return 0;
    }
    whole_engine.push_back(std::make_unique<cpu::CpuEngine>(whole.shard(0), whole.shard_id(0),
                                                            cpu::CpuEngineOptions{}));
    prefault(whole.shard(0));
    for (std::size_t s = 0; s < sharded.num_open_shards(); ++s) prefault(sharded.shard(s));
    std::cerr << fmt::format("{} queries, mode {}, k {}, batch {}, {} threads; {} shards\n",
                             queries.size(), mode_arg, k, batch, threads, shard_engines.size());

    nlohmann::json out = {{"whole", whole_dir.string()},   {"sharded", sharded_dir.string()},
                          {"queries", queries.size()},     {"mode", mode_arg},
                          {"k", k},                        {"batch", batch},
                          {"threads", threads},            {"shards", shard_engines.size()},
                          {"in_order", in_order},
                          {"runs", nlohmann::json::array()}};
    std::vector<ShardResult> reference;  // the whole shard's answers
    std::string configs = configs_arg + ",";
    for (unsigned rep = 1; rep <= reps; ++rep)
      for (std::size_t at = 0, comma; (comma = configs.find(',', at)) != std::string::npos;
           at = comma + 1) {
        const std::string config = configs.substr(at, comma - at);
        if (config.empty()) continue;
        const bool processes = config == "processes" || config == "processes-lockstep";
        if (config != "whole" && config != "in-turn" && config != "at-once" &&
            config != "lockstep" && config != "at-once-shm" && config != "lockstep-shm" &&
            !processes)
          throw InputError("--configs", 0, "unknown config '" + config + "'");
        if (processes && shard_engines.size() < 2)
          throw InputError("--configs", 0, config + " needs a --sharded index of 2 shards or more");
        ConfigRun r =
            config == "whole"
                ? run_config(config, whole, whole_engine, queries, p, batch, threads)
            : processes
                ? run_processes(config, self_args, shard_engines.size(), queries.size())
                : run_config(config, sharded, shard_engines, queries, p, batch, threads);
        std::size_t wrong = 0;
        if (config == "whole") {
          if (reference.empty()) reference = r.by_shard[0];
        } else if (!reference.empty()) {
          for (std::size_t q = 0; q < queries.size(); ++q) {
            std::vector<const ShardResult*> ptrs;
            for (const auto& shard : r.by_shard) ptrs.push_back(&shard[q]);
            const QueryResult got = merge_shard_results(p, ptrs);
            const std::vector<const ShardResult*> one = {&reference[q]};
            const QueryResult want = merge_shard_results(p, one);
            // The same documents (global ranks) in the same order, scores within the contract's
            // tolerance: both sides break ties on the global rank.
            bool same = got.hits.size() == want.hits.size() &&
                        got.answered_by_or == want.answered_by_or;
            for (std::size_t i = 0; same && i < got.hits.size(); ++i)
              same = got.hits[i].rank == want.hits[i].rank &&
                     std::abs(got.hits[i].score - want.hits[i].score) <=
                         kScoreRelativeTolerance * std::abs(want.hits[i].score);
            wrong += !same;
          }
        }
        const double nq = double(queries.size());
        std::cerr << fmt::format(
            "{:8s} rep {}: {:8.0f} q/s, {:7.3f} s, cpu {:7.3f} s ({:6.1f} us a query), "
            "{:7.1f} docs, {:8.1f} postings a query, {} minor faults, {} answers differ{}\n",
            config, rep, nq / r.seconds, r.seconds, r.cpu_seconds, 1e6 * r.cpu_seconds / nq,
            double(r.work.docs_scored) / nq, double(r.work.postings_decoded) / nq,
            r.minor_faults, wrong,
            reference.empty() ? " (no whole run to check against)" : "");
        out["runs"].push_back({{"config", config},
                               {"rep", rep},
                               {"seconds", r.seconds},
                               {"cpu_seconds", r.cpu_seconds},
                               {"minor_faults", r.minor_faults},
                               {"queries_per_second", nq / r.seconds},
                               {"docs_scored", r.work.docs_scored},
                               {"postings_decoded", r.work.postings_decoded},
                               {"or_phases_stopped", r.work.or_phases_stopped},
                               {"answers_differ", wrong}});
        if (wrong > 0) std::cerr << "bench_shared_shards: answers differ from the whole shard's\n";
      }
    if (!out_path.empty()) std::ofstream(out_path) << out.dump(1) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_shared_shards: " << e.what() << "\n";
    return 1;
  }
}
