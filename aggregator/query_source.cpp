#include "aggregator/query_source.hpp"

#include <iostream>

#include "aggregator/aggregator.hpp"
#include "aggregator/rpc_front_end.hpp"

namespace gpusearch {

FileQuerySource::FileQuerySource(std::string path, double qps)
    : path_(std::move(path)), qps_(qps), file_(read_query_file(path_)) {}

AggregatorClock::time_point FileQuerySource::scheduled(AggregatorClock::time_point start,
                                                       std::size_t i) const {
  return start + std::chrono::duration_cast<AggregatorClock::duration>(
                     std::chrono::duration<double>(double(i) / qps_));
}

void FileQuerySource::poll(AggregatorClock::time_point start, AggregatorClock::time_point now,
                           std::size_t room, std::vector<ArrivedQuery>& out) {
  while (next_ < file_.queries.size()) {
    AggregatorClock::time_point arrival = now;
    if (qps_ > 0) {
      arrival = scheduled(start, next_);
      if (arrival > now) break;
    } else if (room == 0) {
      break;
    } else {
      --room;
    }
    ArrivedQuery a;
    a.text = std::move(file_.queries[next_++]);  // each line is delivered once
    a.arrival = arrival;
    out.push_back(std::move(a));
  }
}

AggregatorClock::time_point FileQuerySource::next_arrival(AggregatorClock::time_point start) const {
  if (qps_ <= 0 || next_ >= file_.queries.size()) return AggregatorClock::time_point::max();
  return scheduled(start, next_);
}

std::vector<QueryProblem> FileQuerySource::take_problems() {
  std::vector<QueryProblem> p = std::move(file_.problems);
  file_.problems.clear();
  return p;
}

StdinQuerySource::StdinQuerySource(std::function<void()> on_line) : on_line_(std::move(on_line)) {
  reader_ = std::thread([this] { read_lines(); });
}

StdinQuerySource::~StdinQuerySource() {
  if (reader_.joinable()) reader_.detach();  // may sit in a read on a terminal; harmless
}

void StdinQuerySource::poll(AggregatorClock::time_point, AggregatorClock::time_point, std::size_t,
                            std::vector<ArrivedQuery>& out) {
  std::lock_guard lock(mutex_);
  while (!lines_.empty()) {
    out.push_back(std::move(lines_.front()));
    lines_.pop_front();
  }
}

bool StdinQuerySource::exhausted() const {
  std::lock_guard lock(mutex_);
  return eof_ && lines_.empty();
}

std::vector<QueryProblem> StdinQuerySource::take_problems() {
  std::lock_guard lock(mutex_);
  std::vector<QueryProblem> p = std::move(problems_);
  problems_.clear();
  return p;
}

void StdinQuerySource::read_lines() {
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
      if (ok) {
        ArrivedQuery a;
        a.text = std::move(q);
        a.arrival = AggregatorClock::now();
        lines_.push_back(std::move(a));
      } else {
        problems_.push_back(std::move(p));
      }
    }
    on_line_();
  }
  {
    std::lock_guard lock(mutex_);
    eof_ = true;
  }
  on_line_();
}

std::unique_ptr<QuerySource> make_query_source(const AggregatorOptions& options,
                                               const SearchParams& params,
                                               std::function<void()> on_arrival) {
  if (!options.front_end.listen.empty())
    return std::make_unique<RpcQuerySource>(options.front_end, params, std::move(on_arrival));
  if (options.queries == "-") return std::make_unique<StdinQuerySource>(std::move(on_arrival));
  return std::make_unique<FileQuerySource>(options.queries, options.qps);
}

}  // namespace gpusearch
