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
        {"service", model.service_us}}},
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
        {"batches", s.timeline}}},
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

}  // namespace gpusearch
