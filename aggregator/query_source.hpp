// Where the aggregator's queries come from (a part of aggregator.cpp kept apart): a file
// replayed closed-loop or at a rate, or standard input read by a thread.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aggregator/aggregator.hpp"
#include "common/query.hpp"

namespace gpusearch {

// Where queries come from: a file replayed closed-loop or at a rate, or standard input read by
// a thread (std::getline blocks; the MPI loop must not).
class QuerySource {
 public:
  // `on_line` runs on the reader thread after each standard-input line (wakes the MPI thread).
  QuerySource(const AggregatorOptions& o, std::function<void()> on_line)
      : options_(o), on_line_(std::move(on_line)) {
    if (o.queries == "-") {
      stdin_ = true;
      reader_ = std::thread([this] { read_stdin(); });
    } else {
      file_ = read_query_file(o.queries);
      problems_ = file_.problems;
    }
  }
  ~QuerySource() {
    if (reader_.joinable()) reader_.detach();  // may sit in a read on a terminal; harmless
  }
  const std::string& name() const { return options_.queries; }
  std::uint64_t total() const { return stdin_ ? 0 : file_.queries.size(); }

  // Queries that have arrived by `now`, at most `room` (closed-loop replay), with arrival times.
  void poll(AggregatorClock::time_point start, AggregatorClock::time_point now, std::size_t room,
            std::vector<std::pair<QueryText, AggregatorClock::time_point>>& out) {
    if (stdin_) {
      std::lock_guard lock(mutex_);
      while (!lines_.empty()) {
        out.push_back(std::move(lines_.front()));
        lines_.pop_front();
      }
      return;
    }
    while (next_ < file_.queries.size()) {
      AggregatorClock::time_point arrival = now;
      if (options_.qps > 0) {
        arrival = start + std::chrono::duration_cast<AggregatorClock::duration>(
                              std::chrono::duration<double>(double(next_) / options_.qps));
        if (arrival > now) break;
      } else if (room == 0) {
        break;
      } else {
        --room;
      }
      out.emplace_back(file_.queries[next_++], arrival);
    }
  }
  // When the next query arrives in open-loop replay (--qps); max() when that is not known.
  AggregatorClock::time_point next_arrival(AggregatorClock::time_point start) const {
    if (stdin_ || options_.qps <= 0 || next_ >= file_.queries.size())
      return AggregatorClock::time_point::max();
    return start + std::chrono::duration_cast<AggregatorClock::duration>(
                       std::chrono::duration<double>(double(next_) / options_.qps));
  }
  bool exhausted() const {
    if (!stdin_) return next_ >= file_.queries.size();
    std::lock_guard lock(mutex_);
    return eof_ && lines_.empty();
  }
  std::vector<QueryProblem> take_problems() {
    std::lock_guard lock(mutex_);
    std::vector<QueryProblem> p = std::move(problems_);
    problems_.clear();
    return p;
  }

 private:
  void read_stdin() {
    std::string line;
    std::uint64_t line_no = 0;
    while (std::getline(std::cin, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
      QueryText q;
      QueryProblem p;
      const bool ok = parse_tsv_query_line(line, line_no, q, p, "<stdin>");
      {
        std::lock_guard lock(mutex_);
        if (ok)
          lines_.emplace_back(std::move(q), AggregatorClock::now());
        else
          problems_.push_back(std::move(p));
      }
      on_line_();
    }
    {
      std::lock_guard lock(mutex_);
      eof_ = true;
    }
    on_line_();
  }

  const AggregatorOptions& options_;
  std::function<void()> on_line_;
  bool stdin_ = false;
  QueryFile file_;
  std::size_t next_ = 0;
  mutable std::mutex mutex_;
  std::deque<std::pair<QueryText, AggregatorClock::time_point>> lines_;
  std::vector<QueryProblem> problems_;
  bool eof_ = false;
  std::thread reader_;
};

}  // namespace gpusearch
