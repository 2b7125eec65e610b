#include <thread>
#include <cstdio>
#include <chrono>
#include <tbb/task_arena.h>
#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/kth_impact_table.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"
using namespace gpusearch;
using cpu::ThresholdSlot;
struct Tally { QueryCounters w; std::size_t or_runs = 0, or_wasted = 0, queries=0; };
int main(int argc, char** argv) {
  const std::size_t nq = argc > 1 ? atoi(argv[1]) : 2048;
  const bool par = argc > 2 ? atoi(argv[2]) : 1;
  const Index whole = Index::open("/tmp/s31idx1m");
  const Index four = Index::open("/tmp/scratch/idx1m-input-ranges");
  const QueryFile qf = read_query_file("/tmp/s31idx1m/queries.test.tsv");
  std::vector<Query> qs;
  for (const QueryText& qt : qf.queries) { Query q; QueryProblem pr;
    if (qs.size() < nq && resolve_query(whole.shard(0), qt, QueryLimits{}, q, pr, "") && !q.terms.empty()) qs.push_back(std::move(q)); }
  SearchParams p; p.mode = Mode::kAndOr; p.k = 10;
  // one engine, whole
  cpu::CpuEngine one(whole.shard(0), 0, cpu::CpuEngineOptions{});
  std::vector<ShardResult> r1(qs.size());
  { tbb::task_arena a(2); a.execute([&]{ one.search(qs, p, r1); }); }
  Tally t1; for (auto& r : r1) { t1.w.add(r.counters); if (!r.or_hits.empty()) t1.or_runs++; }
  std::printf("one: docs %.1f postings %.1f or-phases %zu of %zu\n", double(t1.w.docs_scored)/qs.size(), double(t1.w.postings_decoded)/qs.size(), t1.or_runs, qs.size());
  // four engines sharing
  constexpr std::size_t phase = 1 + ThresholdSlot::kUnionCapacity;
  std::vector<std::uint64_t> words(2 * phase * qs.size(), 0);
  std::vector<cpu::QueryThresholdSlots> slots(qs.size());
  auto slot = [&](std::uint64_t* w) { return ThresholdSlot(w, 1, w + 1, ThresholdSlot::kUnionCapacity); };
  for (std::size_t q = 0; q < qs.size(); ++q) slots[q] = {slot(&words[2*phase*q]), slot(&words[2*phase*q+phase])};
  std::vector<std::unique_ptr<cpu::CpuEngine>> eng; std::vector<const KthImpactTable*> tables;
  for (std::size_t s = 0; s < 4; ++s) eng.push_back(std::make_unique<cpu::CpuEngine>(four.shard(s), s, cpu::CpuEngineOptions{}));
  for (auto& e : eng) tables.push_back(e->kth_impacts());
  auto comb = std::make_shared<const KthImpactTable>(KthImpactTable::combine(tables));
  if (getenv("WHOLE_TABLE")) { std::shared_ptr<const KthImpactTable> wt(one.kth_impacts(), [](const KthImpactTable*){}); for (auto& e : eng) e->set_collection_seeds(wt); }
  else for (auto& e : eng) e->set_collection_seeds(comb);
  std::vector<std::vector<ShardResult>> rs(4, std::vector<ShardResult>(qs.size()));
  auto run = [&](std::size_t s){ tbb::task_arena a(1); a.execute([&]{ eng[s]->search(qs, p, rs[s], slots); }); };
  if (par) { std::vector<std::thread> th; for (std::size_t s=0;s<4;++s) th.emplace_back(run,s); for (auto&t:th) t.join(); }
  else for (std::size_t s=0;s<4;++s) run(s);
  Tally t4; std::size_t or_needed = 0, stopped = 0;
  for (std::size_t q = 0; q < qs.size(); ++q) {
    std::uint64_t tot = 0; bool any_or = false; int ors = 0;
    for (int s = 0; s < 4; ++s) { tot += rs[s][q].and_matches; t4.w.add(rs[s][q].counters); if (!rs[s][q].or_hits.empty()) { ors++; } }
    t4.or_runs += ors; for (int s=0;s<4;++s) stopped += rs[s][q].counters.or_phases_stopped; if (tot >= p.k) t4.or_wasted += ors; else or_needed++;
  }
  { double d1[3]={0,0,0}, d4[3]={0,0,0}; std::size_t n[3]={0,0,0};
    for (std::size_t q = 0; q < qs.size(); ++q) { std::uint64_t tot=0; int ors=0; double w=0;
      for (int s=0;s<4;++s){ tot+=rs[s][q].and_matches; w+=rs[s][q].counters.docs_scored; if(!rs[s][q].or_hits.empty()) ors++; }
      int c = tot < p.k ? 1 : (ors ? 2 : 0); d1[c]+=r1[q].counters.docs_scored; d4[c]+=w; n[c]++; }
    const char* nm[3]={"AND only","OR needed","wasted OR"};
    for(int c=0;c<3;++c) std::printf("  %-10s %5zu queries: one %.0f four %.0f docs/query (%.3fx)\n", nm[c], n[c], d1[c]/n[c], d4[c]/n[c], d4[c]/d1[c]); }
  std::printf("four(%s): docs %.1f postings %.1f or-phases %zu (wasted %zu), queries needing OR %zu stopped %zu\n", par?"parallel":"serial", double(t4.w.docs_scored)/qs.size(), double(t4.w.postings_decoded)/qs.size(), t4.or_runs, t4.or_wasted, or_needed, stopped);

  for (int rep = 0; rep < 3; ++rep) for (int mode = 0; mode < 2; ++mode) {
    std::fill(words.begin(), words.end(), 0);
    QueryCounters w;
    auto t0 = std::chrono::steady_clock::now();
    auto go = [&](std::size_t s){ tbb::task_arena a(1); a.execute([&]{
      if (mode) eng[s]->search(qs, p, rs[s], slots);
      else for (std::size_t q = 0; q < qs.size(); ++q) rs[s][q] = eng[s]->search_one(qs[q], p, slots[q]); }); };
    std::vector<std::thread> th; for (std::size_t s=0;s<4;++s) th.emplace_back(go,s); for (auto&t:th) t.join();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count();
    for (auto& v : rs) for (auto& r : v) w.add(r.counters);
    std::printf("rep %d %s: %.3f s docs %.1f\n", rep, mode ? "two-pass" : "per-query", sec, double(w.docs_scored)/qs.size());
  }
}
