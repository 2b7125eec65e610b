// Writes answers to the run file in the order their queries arrived, whatever order they were
// answered in (result cache hits at once, batches as they complete, cost buckets reordering
// queries within and across batches, several batches in flight): a run file is then the same
// bytes for every pipeline depth, batch size and ISN count. Answers that come early wait here;
// at most the admission window's worth can (closed-loop replay admits no more).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "aggregator/result_cache.hpp"
#include "common/run_file.hpp"

namespace gpusearch {

class ArrivalOrderWriter {
 public:
  ArrivalOrderWriter(std::ostream& out, std::string tag) : out_(out), tag_(std::move(tag)) {}
  // The answer of the query that arrived as number `sequence` (0, 1, 2, ... without gaps).
  void add(std::uint64_t sequence, std::string qid, std::vector<CachedHit> hits) {
    waiting_.emplace(sequence, Entry{std::move(qid), std::move(hits)});
    max_waiting_ = std::max(max_waiting_, waiting_.size());
    for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_;
         it = waiting_.erase(it), ++next_) {
      const Entry& e = it->second;
      for (std::size_t i = 0; i < e.hits.size(); ++i)
        write_run_line(out_, e.qid, e.hits[i].docid, int(i + 1), e.hits[i].score, tag_);
    }
  }
  std::uint64_t written() const { return next_; }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t max_waiting() const { return max_waiting_; }

 private:
  struct Entry {
    std::string qid;
    std::vector<CachedHit> hits;
  };
  std::ostream& out_;
  std::string tag_;
  std::map<std::uint64_t, Entry> waiting_;
  std::uint64_t next_ = 0;
  std::size_t max_waiting_ = 0;
};

}  // namespace gpusearch
