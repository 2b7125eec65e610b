// --rpc-thread's placement (common/thread_placement.hpp): specs parse or are refused naming the
// flag; a thread is pinned where asked (or told which CPUs it may use); real-time priority is
// granted or refused with the reason. A whole process's pinning (--pin-cores) below.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/thread_placement.hpp"

using namespace gpusearch;

namespace {

int first_allowed_cpu() {
  cpu_set_t allowed;
  EXPECT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) return c;
  return -1;
}

// Runs `f` on a thread of its own, so that the test's thread keeps its placement.
template <typename F>
void on_own_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

}  // namespace

TEST(ThreadPlacement, SpecsParseAndBadOnesAreRefusedNamingTheFlag) {
  EXPECT_FALSE(parse_thread_placement("", "--rpc-thread").any());
  const ThreadPlacement cpu = parse_thread_placement("3", "--rpc-thread");
  EXPECT_EQ(cpu.cpu, 3);
  EXPECT_FALSE(cpu.realtime);
  const ThreadPlacement rt = parse_thread_placement("rt", "--rpc-thread");
  EXPECT_EQ(rt.cpu, -1);
  EXPECT_TRUE(rt.realtime);
  for (const char* both : {"1,rt", "rt,1"}) {
    const ThreadPlacement p = parse_thread_placement(both, "--rpc-thread");
    EXPECT_EQ(p.cpu, 1) << both;
    EXPECT_TRUE(p.realtime) << both;
  }
  for (const char* bad : {"x", "1,2", "-1", "rt,", ",1", "rt,rt", "99999", "1024", "0,fifo"}) {
    try {
      parse_thread_placement(bad, "--my-flag");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--my-flag"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    }
  }
}

TEST(ThreadPlacement, PinsTheCallingThreadOrNamesTheCpusItMayUse) {
  const int cpu = first_allowed_cpu();
  ASSERT_GE(cpu, 0);
  on_own_thread([cpu] {
    EXPECT_EQ(place_this_thread({cpu, false}), "");
    cpu_set_t now;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof now, &now), 0);
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &now));
    EXPECT_EQ(sched_getcpu(), cpu);
  });
  on_own_thread([cpu] {
    const std::string why = place_this_thread({CPU_SETSIZE - 1, false});
    EXPECT_NE(why.find("cannot pin to CPU " + std::to_string(CPU_SETSIZE - 1)), std::string::npos)
        << why;
    EXPECT_NE(why.find("may run on CPUs " + std::to_string(cpu)), std::string::npos) << why;
  });
}

TEST(ThreadPlacement, RealTimeIsGrantedOrRefusedWithTheReason) {
  on_own_thread([] {
    const std::string why = place_this_thread({-1, true});
    int policy = -1;
    sched_param param{};
    ASSERT_EQ(pthread_getschedparam(pthread_self(), &policy, &param), 0);
    if (why.empty()) {
      EXPECT_EQ(policy, SCHED_FIFO);
      EXPECT_EQ(param.sched_priority, 1);
    } else {  // an unprivileged user (CI): the thread stays as it was, and the message says why
      EXPECT_NE(why.find("CAP_SYS_NICE"), std::string::npos) << why;
      EXPECT_EQ(policy, SCHED_OTHER);
    }
  });
}

// --pin-cores (issue 16): CPU lists parse or are refused naming the flag; the node's ISNs get
// disjoint contiguous slices that cover the CPUs; a process is pinned where asked.
TEST(ProcessPinning, CpuListsParseFormatAndBadOnesAreRefusedNamingTheFlag) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5,1,1,0-2"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(format_cpu_list(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(std::vector<int>{}), "");
  for (const char* bad : {"", "x", "3-1", "0,", "-2", "1-", "0-99999"}) {
    try {
      parse_cpu_list(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--pin-cores"), std::string::npos) << e.what();
    }
  }
}

TEST(ProcessPinning, SlicesAreDisjointContiguousAndCoverEveryCpu) {
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_EQ(cpu_slice(cpus, 0, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cpu_slice(cpus, 3, 4), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(cpu_slice(cpus, 0, 1), cpus);
  for (int n : {1, 2, 3, 5, 7, 16}) {
    std::vector<int> seen;
    for (int i = 0; i < n; ++i) {
      const std::vector<int> s = cpu_slice(cpus, i, n);
      EXPECT_GE(s.size(), cpus.size() / std::size_t(n));
      EXPECT_LE(s.size(), cpus.size() / std::size_t(n) + 1);
      seen.insert(seen.end(), s.begin(), s.end());
    }
    EXPECT_EQ(seen, cpus) << n << " slices";
  }
  // More ISNs than CPUs: one CPU each, round-robin.
  EXPECT_EQ(cpu_slice(std::vector<int>{4, 6}, 0, 3), (std::vector<int>{4}));
  EXPECT_EQ(cpu_slice(std::vector<int>{4, 6}, 2, 3), (std::vector<int>{4}));
  EXPECT_TRUE(cpus_to_pin("off", 0, 4).empty());
  EXPECT_EQ(cpus_to_pin("auto", 0, 1), allowed_cpus());
  EXPECT_THROW(cpus_to_pin(std::to_string(CPU_SETSIZE - 1), 0, 1), InputError);
}

TEST(ProcessPinning, EveryThreadOfTheProcessIsPinnedAndLaterThreadsInheritIt) {
  const std::vector<int> before = allowed_cpus();
  ASSERT_FALSE(before.empty());
  // A thread that exists before the pinning.
  std::atomic<bool> go{false};
  std::vector<int> seen_by_old;
  std::thread old([&] {
    while (!go) std::this_thread::yield();
    seen_by_old = allowed_cpus();
  });
  const std::vector<int> one = {before.back()};
  EXPECT_GE(pin_process_threads(one), 2u);
  go = true;
  old.join();
  EXPECT_EQ(seen_by_old, one);
  EXPECT_EQ(allowed_cpus(), one);
  std::vector<int> seen_by_new;
  on_own_thread([&] { seen_by_new = allowed_cpus(); });
  EXPECT_EQ(seen_by_new, one);
  pin_process_threads(before);  // the other tests run on every CPU again
  EXPECT_EQ(allowed_cpus(), before);
}
