// Writes the run file on a thread of its own: the merge thread hands each answer over and goes
// on to the next batch. On the 16-core host the merge took 0.42 ms per batch of 64 queries at
// k = 10, most of it formatting and writing the 640 run lines and flushing the file once per
// batch (tests/benchmarks/NOTES-cluster.md); that time was part of every batch's path from cut to
// merged answers. The order and the bytes are ArrivalOrderWriter's; the file is flushed whenever
// the hand-over queue runs dry, and at finish().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aggregator/arrival_order_writer.hpp"
#include "aggregator/packed_answers.hpp"

namespace gpusearch {

class RunWriterThread {
 public:
  RunWriterThread(std::ostream& out, std::string tag)
      : out_(out), order_(out, std::move(tag)), thread_([this] { loop(); }) {}
  ~RunWriterThread() { finish(); }
  RunWriterThread(const RunWriterThread&) = delete;
  RunWriterThread& operator=(const RunWriterThread&) = delete;

  // The answer of the query that arrived as number `sequence` (ArrivalOrderWriter::add).
  void add(std::uint64_t sequence, std::string_view qid, const std::vector<CachedHit>& hits) {
    PackedAnswers one;
    one.add(sequence, qid, hits);
    add_all(one);
  }
  // A job's answers at once: one lock and one wake-up instead of one per answer. Leaves
  // `answers` empty, holding a buffer the writer is done with when it has one (so that a
  // steady stream of jobs reuses the same few buffers).
  void add_all(PackedAnswers& answers) {
    if (answers.empty()) return;
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(answers));
      if (!spare_.empty()) {
        answers = std::move(spare_.back());
        spare_.pop_back();
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
    std::vector<PackedAnswers> items;
    for (;;) {
      bool dry;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stop_ and nothing left
        items.swap(queue_);
      }
      for (PackedAnswers& job : items) order_.add(job);
      {
        std::lock_guard lock(mutex_);
        // Written buffers go back to the merge thread (a few: enough for a steady stream).
        for (PackedAnswers& job : items)
          if (spare_.size() < kSpareBuffers) spare_.push_back(std::move(job));
        dry = queue_.empty();
      }
      items.clear();
      if (dry) out_.flush();
    }
    out_.flush();
  }

  static constexpr std::size_t kSpareBuffers = 4;
  std::ostream& out_;
  ArrivalOrderWriter order_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<PackedAnswers> queue_;
  std::vector<PackedAnswers> spare_;  // written, cleared by add_all before reuse
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace gpusearch
