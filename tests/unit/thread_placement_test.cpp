// --rpc-thread's placement (common/thread_placement.hpp): specs parse or are refused naming the
// flag; a thread is pinned where asked (or told which CPUs it may use); real-time priority is
// granted or refused with the reason.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <string>
#include <thread>

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
