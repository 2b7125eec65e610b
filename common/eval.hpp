// Retrieval effectiveness against relevance judgments: nDCG@k, MAP and P@k of a TREC run
// (what `gpusearch eval` prints and what the second-stage ranker is judged by, issue 12).
//
// Definitions (those of trec_eval's ndcg_cut / map / P, with one stated difference in ordering):
// - A run's documents for a query are taken by score descending; equal scores keep the order of
//   the rank column (then of the file). gpusearch's run files rank ties by internal docID, so
//   the file's order is the engine's order. (trec_eval breaks score ties by docid instead.)
// - A document is relevant when its grade is > 0; unjudged documents count as non-relevant.
// - nDCG@k: sum over ranks i = 1..k of gain_i / log2(i + 1), gain = the qrels grade (negative
//   grades count as 0), divided by the same sum over the judged grades sorted descending (the
//   ideal ranking from the qrels, also cut at k). 0 when the query has no relevant document.
// - AP: sum of P@i over the ranks i of relevant retrieved documents, divided by the number of
//   relevant documents in the qrels (over the whole run list, no cut). 0 without relevant ones.
// - P@k: relevant documents in the first k, divided by k (a shorter list still divides by k).
// - Means are over the run's queries that have judgments; a judged query with no relevant
//   document counts with 0 on every metric. Run queries without judgments are left out and
//   counted; so are judged queries the run lacks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpusearch {

// qid -> docid -> grade.
using Qrels = std::map<std::string, std::map<std::string, int>>;

struct JudgedRunDoc {  // one run line, as evaluation needs it
  std::string docid;
  double score = 0;
};
// qid -> documents in ranked order (best first).
using EvalRun = std::map<std::string, std::vector<JudgedRunDoc>>;

// Reads TREC qrels, `qid iter docid grade` (iter is ignored). Throws InputError naming the file
// and line for a line of another shape, a grade that is not an integer, or a (qid, docid) pair
// judged twice.
Qrels read_qrels(const std::filesystem::path& path);

// Reads a TREC run, `qid Q0 docid rank score tag`, and orders each query's documents as stated
// above. More lenient than read_run_file (ranks need not start at 1 or be consecutive, as other
// systems' runs may not), but a malformed line or a document repeated in a query throws
// InputError naming the file and line.
EvalRun read_eval_run(const std::filesystem::path& path);

struct QueryEffectiveness {
  double ndcg = 0;
  double average_precision = 0;
  double precision = 0;
  std::uint64_t relevant = 0;            // relevant documents in the qrels
  std::uint64_t relevant_retrieved = 0;  // of those, in the run (any depth)
};

// One query's metrics at cut-off k (k >= 1). `judgments` may be empty (all zero).
QueryEffectiveness evaluate_query(const std::vector<JudgedRunDoc>& ranked,
                                  const std::map<std::string, int>& judgments, int k);

struct EvalSummary {
  int k = 10;
  std::map<std::string, QueryEffectiveness> per_query;  // the run's judged queries
  double mean_ndcg = 0, mean_ap = 0, mean_precision = 0;
  std::uint64_t queries_without_relevant = 0;    // judged, but no grade > 0 (score 0)
  std::uint64_t run_queries_unjudged = 0;        // in the run, not in the qrels (left out)
  std::uint64_t judged_queries_missing_from_run = 0;  // in the qrels, not in the run (left out)
};

EvalSummary evaluate_run(const EvalRun& run, const Qrels& qrels, int k);

// {"k", "queries", "ndcg@k", "map", "p@k", counts...; "per_query": {qid: {...}} if asked}.
nlohmann::json to_json(const EvalSummary& s, bool per_query);

}  // namespace gpusearch
