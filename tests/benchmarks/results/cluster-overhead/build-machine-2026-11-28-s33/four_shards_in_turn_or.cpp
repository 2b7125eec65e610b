#include <thread>
#include <cstdio>
#include <tbb/task_arena.h>
#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/kth_impact_table.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"
using namespace gpusearch;
using cpu::ThresholdSlot;
static cpu::CpuEngineOptions opts() { cpu::CpuEngineOptions o; if (getenv("ALG")) o.algorithm = cpu::parse_algorithm(getenv("ALG")); return o; }
int main(int argc, char** argv) {
  const std::size_t nq = 4096;
  const Index whole = Index::open("/tmp/s31idx1m");
  const Index four = Index::open("/tmp/scratch/idx1m-input-ranges");
  const QueryFile qf = read_query_file("/tmp/s31idx1m/queries.test.tsv");
  std::vector<Query> qs;
  for (const QueryText& qt : qf.queries) { Query q; QueryProblem pr;
    if (qs.size() < nq && resolve_query(whole.shard(0), qt, QueryLimits{}, q, pr, "") && !q.terms.empty()) qs.push_back(std::move(q)); }
  SearchParams p; p.mode = Mode::kOr; p.k = 10;
  if (getenv("OR_CLASS")) {
    cpu::CpuEngine e0(whole.shard(0), 0, opts());
    SearchParams ao; ao.mode = Mode::kAndOr; ao.k = 10;
    std::vector<Query> keep;
    for (auto& q : qs) { auto r = e0.search_one(q, ao); if (r.and_matches < 10) keep.push_back(q); }
    qs.swap(keep);
    std::printf("OR-class queries: %zu\n", qs.size());
  }
  constexpr std::size_t phase = 1 + ThresholdSlot::kUnionCapacity;
  auto mkslots = [&](std::vector<std::uint64_t>& words) {
    words.assign(2 * phase * qs.size(), 0);
    std::vector<cpu::QueryThresholdSlots> slots(qs.size());
    auto slot = [&](std::uint64_t* w) { return ThresholdSlot(w, 1, w + 1, ThresholdSlot::kUnionCapacity); };
    for (std::size_t q = 0; q < qs.size(); ++q) slots[q] = {slot(&words[2*phase*q]), slot(&words[2*phase*q+phase])};
    return slots; };
  cpu::CpuEngine one(whole.shard(0), 0, opts());
  std::vector<ShardResult> r(qs.size());
  QueryCounters w;
  tbb::task_arena a(1);
  a.execute([&]{ one.search(qs, p, r); }); for (auto& x : r) w.add(x.counters);
  std::printf("OR one engine alone: docs %.1f\n", double(w.docs_scored)/qs.size());
  { std::vector<std::uint64_t> words; auto slots = mkslots(words); w = {};
    std::shared_ptr<const KthImpactTable> wt(one.kth_impacts(), [](const KthImpactTable*){});
    one.set_collection_seeds(wt);
    a.execute([&]{ one.search(qs, p, r, slots); }); for (auto& x : r) w.add(x.counters);
    std::printf("OR one engine linked: docs %.1f\n", double(w.docs_scored)/qs.size()); }
  std::vector<std::unique_ptr<cpu::CpuEngine>> eng;
  for (std::size_t s = 0; s < 4; ++s) eng.push_back(std::make_unique<cpu::CpuEngine>(four.shard(s), s, opts()));
  std::shared_ptr<const KthImpactTable> wt(one.kth_impacts(), [](const KthImpactTable*){});
  for (auto& e : eng) e->set_collection_seeds(wt);
  { std::vector<std::uint64_t> words; auto slots = mkslots(words);
    double per[4];
    for (std::size_t s = 0; s < 4; ++s) { w = {}; a.execute([&]{ eng[s]->search(qs, p, r, slots); }); for (auto& x : r) w.add(x.counters); per[s] = double(w.docs_scored)/qs.size(); }
    std::printf("OR four serial: docs per shard %.1f %.1f %.1f %.1f sum %.1f\n", per[0], per[1], per[2], per[3], per[0]+per[1]+per[2]+per[3]); }
  // one engine over ranges: search_range of quarter
  { w = {}; const DocId n = whole.shard(0).num_docs(); double per[4];
    for (int s = 0; s < 4; ++s) { QueryCounters ws; for (auto& q : qs) ws.add(one.search_range(q, p, n*s/4, n*(s+1)/4).counters); per[s] = double(ws.docs_scored)/qs.size(); }
    std::printf("OR one engine, quarter ranges alone (no sharing): %.1f %.1f %.1f %.1f\n", per[0], per[1], per[2], per[3]); }
}
