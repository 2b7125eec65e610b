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
    lines_.clear();
    if (sequence == next_ && waiting_.empty()) {
      // In order (the common case): straight out, no node in the map.
      max_waiting_ = std::max<std::size_t>(max_waiting_, 1);
      append(qid, hits);
      ++next_;
    } else {
      waiting_.emplace(sequence, Entry{std::move(qid), std::move(hits)});
      max_waiting_ = std::max(max_waiting_, waiting_.size());
    }
    for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_;
         it = waiting_.erase(it), ++next_)
      append(it->second.qid, it->second.hits);
    // One write of every line released (formatting a string per line and inserting each was
    // most of the run writer's time).
    if (!lines_.empty()) out_.write(lines_.data(), std::streamsize(lines_.size()));
  }
  std::uint64_t written() const { return next_; }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t max_waiting() const { return max_waiting_; }

 private:
  struct Entry {
    std::string qid;
    std::vector<CachedHit> hits;
  };
  void append(const std::string& qid, const std::vector<CachedHit>& hits) {
    for (std::size_t i = 0; i < hits.size(); ++i)
      append_run_line(lines_, qid, hits[i].docid, int(i + 1), hits[i].score, tag_);
  }
  std::ostream& out_;
  std::string tag_;
  std::map<std::uint64_t, Entry> waiting_;
  std::string lines_;  // the lines of one add(), reused
  std::uint64_t next_ = 0;
  std::size_t max_waiting_ = 0;
};

}  // namespace gpusearch
