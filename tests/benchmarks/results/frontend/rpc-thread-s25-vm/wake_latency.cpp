// Wake-up latency between two threads of one process through pipes, after a gap (issue-14-s25;
// not built with the project): g++ -O2 -pthread wake_latency.cpp -o wake && ./wake GAP_US CPU_A CPU_B N
// (CPU -1: not pinned). Prints the one-way (A wakes B) and round-trip percentiles.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using Clock = std::chrono::steady_clock;
static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
int main(int argc, char** argv) {
  int gap_us = argc > 1 ? atoi(argv[1]) : 5000;
  int ca = argc > 2 ? atoi(argv[2]) : -1, cb = argc > 3 ? atoi(argv[3]) : -1;
  int n = argc > 4 ? atoi(argv[4]) : 1000;
  int p1[2], p2[2]; pipe(p1); pipe(p2);
  std::vector<double> oneway, back, rtt;
  std::thread b([&] {
    pin(cb);
    for (int i = 0; i < n; ++i) {
      Clock::time_point t; if (read(p1[0], &t, sizeof t) != sizeof t) return;
      oneway.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      t = Clock::now(); write(p2[1], &t, sizeof t);
    }
  });
  pin(ca);
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    auto t0 = Clock::now(); write(p1[1], &t0, sizeof t0);
    Clock::time_point t; read(p2[0], &t, sizeof t);
    auto now = Clock::now();
    back.push_back(std::chrono::duration<double, std::micro>(now - t).count());
    rtt.push_back(std::chrono::duration<double, std::micro>(now - t0).count());
  }
  b.join();
  auto p = [](std::vector<double>& v, double q) { std::sort(v.begin(), v.end()); return v[size_t(q * (v.size() - 1))]; };
  printf("gap %5d us pin %2d/%2d: one-way p50 %6.1f p90 %6.1f | back p50 %6.1f | rtt p50 %6.1f p90 %6.1f us\n", gap_us, ca, cb,
         p(oneway, .5), p(oneway, .9), p(back, .5), p(rtt, .5), p(rtt, .9));
}
