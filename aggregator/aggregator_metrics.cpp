#include "aggregator/aggregator_metrics.hpp"

#include <fmt/format.h>

#include "common/metrics.hpp"

namespace gpusearch {

namespace {
nlohmann::json summary(const metrics::SampleSet& s) { return s.summary(); }
}  // namespace

nlohmann::json aggregator_metrics(const AggregatorRunParts& p) {
  const AggregatorOptions& options = p.options;
  const AdmissionStats& a = p.admission;
  const MergeStats& s = p.merger.stats();
  const LatencyModel model = p.merger.model();
  const std::size_t num_isns = p.isns.size();
  nlohmann::json problem_lines = nlohmann::json::array();
  for (std::size_t i = 0; i < a.problems.size(); ++i)
    problem_lines.push_back(a.problems[i].message());
  return {
      {"index", options.index_dir.string()},
      {"isns", num_isns},
      {"engine", num_isns == 0 ? "" : p.isns[0].hello.value("engine", "")},
      {"mode", std::string(to_string(p.params.mode))},
      {"scoring", std::string(to_string(p.params.scoring))},
      {"alpha", p.params.alpha},
      {"k", p.params.k},
      {"queries",
       {{"read", s.answered + a.skipped},
        {"run", s.answered},
        {"skipped", a.skipped},
        {"skipped_messages", problem_lines},
        {"no_known_terms", a.no_known_terms},
        {"unknown_tokens", a.unknown_tokens},
        {"empty_results", s.empty_results},
        {"answered_by_or", s.answered_by_or + a.cache_hits_by_or},
        {"partial", s.partial_answers},
        {"cache_hits", a.cache_hits},
        {"hits_written", s.hits_written}}},
      {"start_seconds", p.start_seconds},
      {"seconds", p.run_seconds},
      {"queries_per_second", p.run_seconds > 0 ? double(s.answered) / p.run_seconds : 0.0},
      {"latency_ms", summary(s.latency_ms)},
      {"batch_policy",
       {{"batch_size", options.batching.batch_size},
        {"max_wait_us", options.batching.max_wait_us},
        {"cost_buckets", options.batching.cost_buckets},
        {"max_in_flight", options.max_in_flight},
        {"depth", options.max_in_flight == 0 ? "auto" : "fixed"},
        {"max_depth", options.max_depth},
        {"window", options.window},
        {"qps", options.qps},
        {"deadline_ms", options.deadline_ms},
        {"cache_entries", options.cache_entries}}},
      {"pipeline_depth", summary(a.depth_samples)},
      {"depth_model_us",
       {{"isn_compute", model.compute_us},
        {"overhead", model.overhead_us},
        {"service", model.service_us},
        {"isn_compute_aim", model.compute_aim_us},
        {"isn_compute_early", model.compute_early_us}}},
      {"batches",
       {{"count", s.batch_sizes.size()},
        {"size", summary(s.batch_sizes)},
        {"with_missing_isns", s.batches_with_misses},
        {"cut_for_deadline", p.deadline_cuts}}},
      {"stages_ms",
       {{"batching_wait_per_query", summary(p.batches.wait_ms())},
        {"encode", summary(p.batches.encode_ms())},
        {"broadcast", summary(s.broadcast_ms)},
        {"to_isn", summary(s.to_isn_ms)},
        {"isn_queue", summary(s.isn_queue_ms)},
        {"isn_compute_max", summary(s.compute_ms)},
        {"isn_idle_max", summary(s.isn_idle_ms)},
        {"isn_encode", summary(s.isn_encode_ms)},
        {"from_isn", summary(s.from_isn_ms)},
        {"round_trip", summary(s.round_trip_ms)},
        {"gather_overhead", summary(s.gather_ms)},
        {"merge_wait", summary(s.merge_wait_ms)},
        {"decode", summary(s.decode_ms)},
        {"merge", summary(s.merge_ms)},
        {"aggregator_overhead", summary(s.overhead_ms)}}},
      {"wire", p.batches.wire_json(p.term_ids)},
      {"progress", p.pacer_stats},
      {"run_file_order",
       {{"order", "arrival"}, {"max_answers_waiting", p.merger.writer().max_waiting()}}},
      {"cache",
       {{"entries", p.cache.cache.size()},
        {"evictions", p.cache.cache.evictions()},
        {"hits", a.cache_hits}}},
      {"messages",
       {{"rejected", p.batches.rejected_messages()},
        {"late_discarded_during_run", p.batches.late_discarded()},
        {"late_discarded", p.isns.late_results()}}},  // including those drained at shutdown
      {"isn", p.isns.to_json(p.run_seconds, p.stuck)},
      {"dead_isns", p.isns.dead_ranks()},
      {"timeline",
       {{"clock", "aggregator steady clock, ms since the run started"},
        {"isn_clocks", p.isns.clocks_json()},
        {"batches", timeline_json(s.timeline)}}},
      {"counters", to_json(s.counters)},
      {"front_end", p.front_end},
      {"peak_rss_bytes", peak_rss_bytes()}};
}

void print_aggregator_summary(const nlohmann::json& m, std::ostream& out) {
  const auto& q = m.at("queries");
  const auto& lat = m.at("latency_ms");
  out << fmt::format(
      "cluster: {} queries ({} skipped, {} cache hits, {} partial, {} with no results) on {} "
      "ISN(s) with the {} engine, mode {}, k {}, {}\n"
      "  {:.3f} s: {:.0f} queries/s; latency p50 {:.2f} ms, p95 {:.2f} ms, p99 {:.2f} ms, max "
      "{:.2f} ms\n"
      "  {} batches (mean size {:.1f}); {} postings decoded, {} documents scored\n",
      q.at("run").get<std::uint64_t>(), q.at("skipped").get<std::uint64_t>(),
      q.at("cache_hits").get<std::uint64_t>(), q.at("partial").get<std::uint64_t>(),
      q.at("empty_results").get<std::uint64_t>(), m.at("isns").get<std::size_t>(),
      m.at("engine").get<std::string>(), m.at("mode").get<std::string>(), m.at("k").get<unsigned>(),
      m.at("scoring").get<std::string>(), m.at("seconds").get<double>(),
      m.at("queries_per_second").get<double>(), lat.value("p50", 0.0), lat.value("p95", 0.0),
      lat.value("p99", 0.0), lat.value("max", 0.0), m.at("batches").at("count").get<std::size_t>(),
      m.at("batches").at("size").value("mean", 0.0),
      m.at("counters").at("postings_decoded").get<std::uint64_t>(),
      m.at("counters").at("docs_scored").get<std::uint64_t>());
}

nlohmann::json ranker_cache_metrics(const AggregatorRanking& ranking, std::uint32_t candidates,
                                    std::size_t rankers_in_store,
                                    const RankerCacheCoordinator* coordinator,
                                    const InFlightBatches& batches, const IsnRoster& isns,
                                    std::uint64_t ranker_fallback_queries) {
  // Summed over ISNs: counts and bytes and seconds; the rate from the sums.
  static const char* const kSummed[] = {
      "requests",       "hits",           "misses",          "loads",
      "evictions",      "commanded_loads", "commanded_evictions", "unplanned_loads",
      "unplanned_evictions", "unused_evictions", "load_failures", "load_bytes"};
  nlohmann::json total = nlohmann::json::object();
  for (const char* k : kSummed) total[k] = std::uint64_t(0);
  total["load_seconds"] = 0.0;
  nlohmann::json per_isn = nlohmann::json::array();
  nlohmann::json fallback_messages = nlohmann::json::array();
  std::uint64_t isn_fallbacks = 0;
  for (std::size_t i = 0; i < isns.size(); ++i) {
    const nlohmann::json& st = isns[i].stats;
    if (!st.is_object() || !st.contains("second_stage") || !st["second_stage"].is_object()) {
      per_isn.push_back({{"rank", i + 1}, {"cache", nullptr}});
      continue;
    }
    const nlohmann::json& ss = st["second_stage"];
    const nlohmann::json cache = ss.value("cache", nlohmann::json::object());
    for (const char* k : kSummed) total[k] = total[k].get<std::uint64_t>() + cache.value(k, std::uint64_t(0));
    total["load_seconds"] = total["load_seconds"].get<double>() + cache.value("load_seconds", 0.0);
    isn_fallbacks += ss.value("ranker_fallbacks", std::uint64_t(0));
    for (const auto& m : ss.value("fallback_messages", nlohmann::json::array()))
      if (fallback_messages.size() < 20) fallback_messages.push_back(m);
    per_isn.push_back({{"rank", i + 1},
                       {"backend", ss.value("backend", "")},
                       {"queries_ranked", ss.value("queries_ranked", std::uint64_t(0))},
                       {"rank_ms", ss.value("rank_ms", 0.0)},
                       {"cache", cache}});
  }
  const auto requests = total["requests"].get<std::uint64_t>();
  total["hit_rate"] = requests ? double(total["hits"].get<std::uint64_t>()) / double(requests) : 0.0;
  return {{"store", ranking.store_dir.string()},
          {"rankers_in_store", rankers_in_store},
          {"ranker", ranking.ranker},
          {"ranker_mix_exponent", std::isnan(ranking.mix_exponent)
                                      ? nlohmann::json(nullptr)
                                      : nlohmann::json(ranking.mix_exponent)},
          {"candidates", candidates},
          {"ranker_fallback_queries", ranker_fallback_queries},
          {"ranker_fallbacks_per_shard", isn_fallbacks},
          {"fallback_messages", fallback_messages},
          {"ranker_cache",
           {{"policy", std::string(to_string(ranking.policy))},
            {"budget_bytes", ranking.cache_bytes},
            {"control_messages", batches.control_messages()},
            {"control_bytes", batches.control_bytes()},
            {"coordinator", coordinator ? coordinator->to_json() : nlohmann::json(nullptr)},
            {"total", total},
            {"isns", per_isn}}}};
}

}  // namespace gpusearch
