#include "aggregator/admission_resolver.hpp"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>

#include "common/error.hpp"
#include "common/term_dictionary.hpp"
#include "common/tokenizer.hpp"

namespace gpusearch {

namespace {

AdmissionResolver::Clock::time_point from_rep(AdmissionResolver::Clock::rep r) {
  return AdmissionResolver::Clock::time_point(AdmissionResolver::Clock::duration(r));
}

// A spin-wait's pause: the sibling hyper-thread keeps the core's resources.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

AdmissionResolver::AdmissionResolver(const TermDictionary& dictionary, QueryLimits limits,
                                     unsigned threads)
    : dictionary_(dictionary), limits_(limits), threads_(std::max(1u, threads)) {
  helpers_.reserve(threads_ - 1);
  try {
    for (unsigned i = 1; i < threads_; ++i) {
      helpers_.emplace_back([this] { helper_loop(); });
      pthread_setname_np(helpers_.back().native_handle(),
                         ("gs-admit-" + std::to_string(i)).substr(0, 15).c_str());
    }
  } catch (const std::system_error& e) {
    stop_helpers();  // the ones started; no destructor runs for a constructor that throws
    throw Error("--admission-threads " + std::to_string(threads_) +
                ": cannot start the resolver's helper threads: " + e.what());
  }
}

AdmissionResolver::~AdmissionResolver() { stop_helpers(); }

void AdmissionResolver::stop_helpers() {
  stop_.store(true);
  {
    std::lock_guard lock(sleep_mutex_);
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
  helpers_.clear();
}

unsigned AdmissionResolver::auto_threads(std::size_t batch_size, std::size_t cores) {
  if (batch_size < 4 * kMinQueriesPerThread) return 1;
  return unsigned(std::clamp<std::size_t>(cores / 4, 1, 4));
}

void AdmissionResolver::expect_batch_at(Clock::time_point at) {
  if (helpers_.empty()) return;
  const Clock::rep rep = at.time_since_epoch().count();
  // seq_cst, as the helper's sleeping_ and its re-check of expected_at_: no lost wake-up.
  if (expected_at_.exchange(rep) == rep) return;
  // A helper asleep until later than the new lead, or for good (its last batch given up), is
  // woken to re-plan. About once a batch; never inside a batch's admission.
  if (sleeping_.load() == 0) return;
  const Clock::rep until = sleep_until_.load();
  if (at - kWakeLead + kReplanSlack >= from_rep(until)) return;
  {
    std::lock_guard lock(sleep_mutex_);
  }
  wake_.notify_all();
}

void AdmissionResolver::resolve(std::span<const ArrivedQuery> arrived,
                                const std::string& source_name, std::vector<ResolvedQuery>& out) {
  out.clear();
  out.resize(arrived.size());
  const std::size_t n = arrived.size();
  if (helpers_.empty() || n < 2 * kMinQueriesPerThread) {
    resolve_range(arrived, source_name, out.data());
    return;
  }
  // Chunks of at least kMinQueriesPerThread, about four a thread (for the balance when a helper
  // joins late).
  job_.arrived = arrived;
  job_.source_name = &source_name;
  job_.out = out.data();
  job_.chunk = std::max(kMinQueriesPerThread, (n + 4 * threads_ - 1) / (4 * threads_));
  job_.chunks = (n + job_.chunk - 1) / job_.chunk;
  job_.next.store(0, std::memory_order_relaxed);
  job_.done.store(0, std::memory_order_relaxed);
  job_.helper_chunks.store(0, std::memory_order_relaxed);
  job_.error = nullptr;
  const std::uint64_t open = job_epoch_.load(std::memory_order_relaxed) + 1;
  job_epoch_.store(open);  // seq_cst: publishes the job
  // A big batch is worth a sleeping helper's wake-up; a small one is done before it would join.
  if (job_.chunks >= 4 && sleeping_.load() > 0) {
    {
      std::lock_guard lock(sleep_mutex_);
    }
    wake_.notify_all();
  }
  work_on_job();
  // The chunks the helpers claimed, then the helpers out of the job before it is reused.
  while (job_.done.load(std::memory_order_acquire) < job_.chunks) cpu_relax();
  job_epoch_.store(open + 1);
  while (joined_.load() != 0) cpu_relax();
  const std::size_t by_helpers = job_.helper_chunks.load(std::memory_order_relaxed);
  ++stats_.split_batches;
  stats_.chunks += job_.chunks;
  stats_.helper_chunks += by_helpers;
  stats_.batches_helped += by_helpers > 0;
  if (job_.error) std::rethrow_exception(job_.error);
}

std::size_t AdmissionResolver::work_on_job() {
  std::size_t took = 0;
  for (;;) {
    const std::size_t c = job_.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job_.chunks) break;
    const std::size_t begin = c * job_.chunk;
    const std::size_t size = std::min(job_.chunk, job_.arrived.size() - begin);
    try {
      resolve_range(job_.arrived.subspan(begin, size), *job_.source_name, job_.out + begin);
    } catch (...) {
      std::lock_guard lock(job_.error_mutex);
      if (!job_.error) job_.error = std::current_exception();
    }
    job_.done.fetch_add(1, std::memory_order_release);
    ++took;
  }
  return took;
}

void AdmissionResolver::helper_loop() {
  // Linux rounds a timed sleep's end up by the thread's timer slack, 50 us by default.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::uint64_t seen = 0;
  auto polling_since = Clock::time_point::max();
  const auto stop_polling = [&](Clock::time_point now) {
    if (polling_since == Clock::time_point::max()) return;
    poll_ns_.fetch_add(std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         now - polling_since)
                                         .count()),
                       std::memory_order_relaxed);
    polling_since = Clock::time_point::max();
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::uint64_t e = job_epoch_.load(std::memory_order_acquire);
    if ((e & 1) && e != seen) {
      stop_polling(Clock::now());
      joined_.fetch_add(1);  // seq_cst with the job's closing (resolve)
      if (job_epoch_.load() == e)
        job_.helper_chunks.fetch_add(work_on_job(), std::memory_order_relaxed);
      joined_.fetch_sub(1, std::memory_order_release);
      seen = e;
      continue;
    }
    const auto now = Clock::now();
    const auto expected = from_rep(expected_at_.load(std::memory_order_acquire));
    const bool expecting = expected != Clock::time_point::max();
    if (expecting && now >= expected - kWakeLead && now < expected + kGiveUp) {
      if (polling_since == Clock::time_point::max()) polling_since = now;
      // Pauses, not sched_yield: a yield is a system call every few hundred nanoseconds. With
      // yields here the ISN computed 2-10% longer beside the helper on the H200 host (session
      // 51, call C; the cause not isolated). A pause also leaves a sibling hyper-thread its
      // share of the core.
      for (int i = 0; i < 64; ++i) cpu_relax();
      continue;
    }
    stop_polling(now);
    // Asleep until the next batch's lead, or until woken (a new expectation, a big job, stop).
    const auto until = expecting && now < expected - kWakeLead ? expected - kWakeLead
                                                                : Clock::time_point::max();
    const Clock::rep planned_for = expected.time_since_epoch().count();
    std::unique_lock lock(sleep_mutex_);
    sleep_until_.store(until.time_since_epoch().count());
    sleeping_.fetch_add(1);
    const auto woken = [&] {
      const std::uint64_t j = job_epoch_.load();
      if (stop_.load() || ((j & 1) && j != seen)) return true;
      const Clock::rep now_expected = expected_at_.load();
      return now_expected != planned_for &&
             from_rep(now_expected) - kWakeLead + kReplanSlack < until;
    };
    if (until == Clock::time_point::max())
      wake_.wait(lock, woken);
    else
      wake_.wait_until(lock, until, woken);
    sleeping_.fetch_sub(1);
    wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
}

AdmissionResolver::HelperStats AdmissionResolver::helper_stats() const {
  HelperStats s = stats_;
  s.helper_poll_seconds = 1e-9 * double(poll_ns_.load(std::memory_order_relaxed));
  s.helper_wakeups = wakeups_.load(std::memory_order_relaxed);
  return s;
}

void AdmissionResolver::resolve_range(std::span<const ArrivedQuery> arrived,
                                      const std::string& source_name, ResolvedQuery* out) const {
  // A batch's term look-ups after an idle gap miss the caches (the dictionary's slot and record,
  // then the term's df), one after the other; asking for every term's lines in rounds first
  // overlaps the misses. Each token is read and hashed once for all the rounds, before the
  // first round: tokenizing between the prefetches queued the text's own reads behind them
  // (64 queries after a 64 MiB sweep, build machine: 38 us for the first round that way, 17 us
  // for both loops apart; NOTES-cluster.md, session 50).
  if (arrived.size() > 1) {
    thread_local std::vector<std::uint64_t> hashes;  // each resolving thread's own, reused
    hashes.clear();
    for (const ArrivedQuery& a : arrived)
      for_each_token(a.text.text,
                     [&](std::string_view tok) { hashes.push_back(TermDictionary::hash(tok)); });
    for (int stage = 0; stage < TermDictionary::kPrefetchStages; ++stage)
      for (std::uint64_t h : hashes) dictionary_.prefetch_hashed(h, stage);
  }
  for (std::size_t i = 0; i < arrived.size(); ++i) {
    ResolvedQuery& r = out[i];
    r.ok = resolve_query(dictionary_, arrived[i].text, limits_, r.query, r.problem, source_name);
    if (!r.ok) continue;
    for (TermId t : r.query.terms) r.cost = std::min(r.cost, double(dictionary_.df_global(t)));
  }
}

}  // namespace gpusearch
