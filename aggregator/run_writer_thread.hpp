// Writes the run file on a thread of its own: the merge thread hands each answer over and goes
// on to the next batch. On the 16-core host the merge took 0.42 ms per batch of 64 queries at
// k = 10, most of it formatting and writing the 640 run lines and flushing the file once per
// batch (tests/benchmarks/NOTES-cluster.md); that time was part of every batch's path from cut to
// merged answers. The order and the bytes are ArrivalOrderWriter's; the file is flushed whenever
// the hand-over queue runs dry, and at finish().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/arrival_order_writer.hpp"

namespace gpusearch {

class RunWriterThread {
 public:
  struct Answer {
    std::uint64_t sequence;
    std::string qid;
    std::vector<CachedHit> hits;
  };
  RunWriterThread(std::ostream& out, std::string tag)
      : out_(out), order_(out, std::move(tag)), thread_([this] { loop(); }) {}
  ~RunWriterThread() { finish(); }
  RunWriterThread(const RunWriterThread&) = delete;
  RunWriterThread& operator=(const RunWriterThread&) = delete;

  // The answer of the query that arrived as number `sequence` (ArrivalOrderWriter::add).
  void add(std::uint64_t sequence, std::string qid, std::vector<CachedHit> hits) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(Answer{sequence, std::move(qid), std::move(hits)});
    }
    ready_.notify_one();
  }
  // A batch's answers at once: one lock and one wake-up instead of one per answer. Leaves
  // `answers` empty.
  void add_all(std::vector<Answer>& answers) {
    if (answers.empty()) return;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) {
        queue_.swap(answers);
      } else {
        queue_.insert(queue_.end(), std::make_move_iterator(answers.begin()),
                      std::make_move_iterator(answers.end()));
      }
    }
    answers.clear();
    ready_.notify_one();
  }
  // Writes everything handed over, flushes and joins the thread. Idempotent.
  void finish() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  // The ordering writer's counts; exact after finish().
  const ArrivalOrderWriter& order() const { return order_; }

 private:
  void loop() {
    std::vector<Answer> items;
    for (;;) {
      bool dry;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stop_ and nothing left
        items.swap(queue_);
      }
      for (Answer& it : items) order_.add(it.sequence, std::move(it.qid), std::move(it.hits));
      items.clear();
      {
        std::lock_guard lock(mutex_);
        dry = queue_.empty();
      }
      if (dry) out_.flush();
    }
    out_.flush();
  }

  std::ostream& out_;
  ArrivalOrderWriter order_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Answer> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace gpusearch
