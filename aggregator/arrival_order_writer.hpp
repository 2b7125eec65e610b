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
#include <span>
#include <string>
#include <vector>

#include "aggregator/packed_answers.hpp"
#include "aggregator/result_cache.hpp"
#include "common/run_file.hpp"

namespace gpusearch {

class ArrivalOrderWriter {
 public:
  ArrivalOrderWriter(std::ostream& out, std::string tag) : out_(out), tag_(std::move(tag)) {}
  // The answer of the query that arrived as number `sequence` (0, 1, 2, ... without gaps).
  void add(std::uint64_t sequence, std::string qid, std::vector<CachedHit> hits) {
    lines_.clear();
    if (in_order(sequence)) {
      append(qid, std::span<const CachedHit>(hits));
      ++next_;
    } else {
      wait(sequence, std::move(qid), std::move(hits));
    }
    release_and_write();
  }
  // A merge job's answers, in the order given: the same lines as add() for each in turn, and
  // one write for all of them. Only an answer that must wait is copied (into owned strings).
  void add(PackedAnswers& answers) {
    lines_.clear();
    for (const PackedAnswers::Answer& a : answers.answers()) {
      if (in_order(a.sequence)) {
        append(a.qid, a.hits);
        ++next_;
      } else {
        wait(a.sequence, std::string(a.qid), owned_answer(a.hits, false).hits);
      }
      drain_waiting();  // what it held up follows it, as add() writes them
    }
    release_and_write();
  }
  std::uint64_t written() const { return next_; }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t max_waiting() const { return max_waiting_; }

 private:
  struct Entry {
    std::string qid;
    std::vector<CachedHit> hits;
  };
  // In order (the common case): straight out, no node in the map.
  bool in_order(std::uint64_t sequence) {
    if (sequence != next_ || !waiting_.empty()) return false;
    max_waiting_ = std::max<std::size_t>(max_waiting_, 1);
    return true;
  }
  void wait(std::uint64_t sequence, std::string qid, std::vector<CachedHit> hits) {
    waiting_.emplace(sequence, Entry{std::move(qid), std::move(hits)});
    max_waiting_ = std::max(max_waiting_, waiting_.size());
  }
  void drain_waiting() {
    for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_;
         it = waiting_.erase(it), ++next_)
      append(it->second.qid, std::span<const CachedHit>(it->second.hits));
  }
  // One write of every line released (formatting a string per line and inserting each was
  // most of the run writer's time).
  void release_and_write() {
    drain_waiting();
    if (!lines_.empty()) out_.write(lines_.data(), std::streamsize(lines_.size()));
  }
  template <typename Hit>
  void append(std::string_view qid, std::span<const Hit> hits) {
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
