// Builds an index from a text corpus (JSONL or TREC files) or straight from the synthetic
// generator, in one pass over the input:
//   1. parallel pipeline (oneTBB): read -> tokenize and count terms -> append postings, keyed by
//      input position, to an in-memory compressed accumulator (memory ~ compressed index size);
//   2. collection statistics, PageRank over the links, GS(d) (paper 000, eq. 4) and the
//      collection-wide GS order;
//   3. shard_writer: shards, GS-ordered docIDs, block compression, manifests, and with
//      forward_index each document's token stream (kept vbyte-compressed, by input position,
//      in collection term IDs until the vocabulary is sorted).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/index_format.hpp"
#include "partition/corpus_reader.hpp"
#include "partition/synthetic_collection.hpp"

namespace gpusearch {

struct BuildOptions {
  std::filesystem::path out_dir;
  std::uint32_t num_shards = 1;
  SplitMode split = SplitMode::kInputRanges;
  codec::Codec codec = codec::Codec::kPForDelta;
  Bm25Params bm25;
  double gs_alpha = 0.3;
  double pagerank_damping = 0.85;
  int pagerank_max_iterations = 200;
  bool progress = true;
  bool force = false;
  bool forward_index = false;  // also write every document's token stream (forward index)
};

// Both return the build report (also stored in the root manifest under "build").
nlohmann::json build_index_from_corpus(const std::vector<std::filesystem::path>& files,
                                       const CorpusReadOptions& read_options,
                                       const BuildOptions& options);
// Also writes the collection's query logs (queries.train.tsv, queries.test.tsv) into out_dir.
nlohmann::json build_index_synthetic(const SyntheticParams& params, const BuildOptions& options);

}  // namespace gpusearch
