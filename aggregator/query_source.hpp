// Where the aggregator's queries come from: one interface, whatever the source (a file replayed
// closed-loop or at a rate, standard input read by a thread; the RPC front end is another).
// The MPI loop polls a source and never blocks on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "aggregator/batcher.hpp"

#include "common/query.hpp"

namespace gpusearch {

struct AggregatorOptions;

// A query that has arrived, with its arrival time (latency is measured from it).
struct ArrivedQuery {
  QueryText text;
  AggregatorClock::time_point arrival;
  std::uint64_t ticket = 0;            // the source's handle for answered() / rejected(); 0: none
  std::optional<SearchParams> params;  // its own mode, k, scoring (RPC); else the cluster's
  AggregatorClock::time_point deadline = AggregatorClock::time_point::max();
};

struct CachedAnswer;

class QuerySource {
 public:
  virtual ~QuerySource() = default;
  // Names the source in problems and messages (a path, "<stdin>").
  virtual const std::string& name() const = 0;
  // Queries it will deliver; 0 when not known in advance.
  virtual std::uint64_t total() const { return 0; }
  // Appends the queries that have arrived by `now`, at most `room` of them where the source
  // can hold queries back (closed-loop replay); `start` is the run's start.
  virtual void poll(AggregatorClock::time_point start, AggregatorClock::time_point now,
                    std::size_t room, std::vector<ArrivedQuery>& out) = 0;
  // When the next query arrives if that is known (open-loop replay); max() otherwise.
  virtual AggregatorClock::time_point next_arrival(AggregatorClock::time_point) const {
    return AggregatorClock::time_point::max();
  }
  // Queries are there whenever asked for (closed-loop replay): the aggregator chooses when each
  // arrives, by the `room` it polls with.
  virtual bool closed_loop() const { return false; }
  // No query will come any more.
  virtual bool exhausted() const = 0;
  // Lines it could not read as queries since the last call (file and line in each).
  virtual std::vector<QueryProblem> take_problems() = 0;
  // The answer to a query it delivered with a ticket (merge thread; also in the run file).
  virtual void answered(std::uint64_t /*ticket*/, const CachedAnswer& /*answer*/, bool /*partial*/,
                        AggregatorClock::time_point /*arrival*/) {}
  // A query it delivered with a ticket that cannot run (MPI thread; counted as skipped).
  virtual void rejected(std::uint64_t /*ticket*/, const QueryProblem& /*problem*/) {}
  // Its own counters for the metrics JSON (null: none).
  virtual nlohmann::json stats() const { return nullptr; }
};

// A query file (TSV or TREC topics), read at once: closed loop (at most `room` admitted per
// poll) or at a fixed arrival rate (`qps` > 0).
class FileQuerySource final : public QuerySource {
 public:
  FileQuerySource(std::string path, double qps);
  const std::string& name() const override { return path_; }
  std::uint64_t total() const override { return file_.queries.size(); }
  void poll(AggregatorClock::time_point start, AggregatorClock::time_point now, std::size_t room,
            std::vector<ArrivedQuery>& out) override;
  AggregatorClock::time_point next_arrival(AggregatorClock::time_point start) const override;
  bool closed_loop() const override { return qps_ <= 0; }
  bool exhausted() const override { return next_ >= file_.queries.size(); }
  std::vector<QueryProblem> take_problems() override;

 private:
  AggregatorClock::time_point scheduled(AggregatorClock::time_point start, std::size_t i) const;
  std::string path_;
  double qps_ = 0;
  QueryFile file_;
  std::size_t next_ = 0;
};

// TSV lines on standard input, read by a thread (std::getline blocks; the MPI loop must not).
// A query arrives when its line is read.
class StdinQuerySource final : public QuerySource {
 public:
  // `on_line` runs on the reader thread after each line (wakes the MPI thread).
  explicit StdinQuerySource(std::function<void()> on_line);
  ~StdinQuerySource() override;
  const std::string& name() const override { return name_; }
  void poll(AggregatorClock::time_point start, AggregatorClock::time_point now, std::size_t room,
            std::vector<ArrivedQuery>& out) override;
  bool exhausted() const override;
  std::vector<QueryProblem> take_problems() override;

 private:
  void read_lines();
  std::string name_ = "-";
  std::function<void()> on_line_;
  mutable std::mutex mutex_;
  std::deque<ArrivedQuery> lines_;
  std::vector<QueryProblem> problems_;
  bool eof_ = false;
  std::thread reader_;
};

// The source the options name: the RPC front end when options.listen is set, "-" standard
// input, anything else a file. `params`: the cluster's defaults (RPC requests may override).
// `on_arrival` wakes the MPI thread when a query arrives from another thread.
std::unique_ptr<QuerySource> make_query_source(const AggregatorOptions& options,
                                               const SearchParams& params,
                                               std::function<void()> on_arrival);

}  // namespace gpusearch
