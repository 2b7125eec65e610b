// The model the aggregator chooses its pipeline depth from (a part of aggregator.cpp kept
// apart): exponentially weighted means of the slowest ISN's compute, the round trip's overhead
// and the service interval, a quantile of the slowest ISN's recent computes, the depth that
// keeps every ISN busy, and (closed-loop replay) when the next batch should be cut so that it
// reaches the ISNs just as they finish the ones ahead.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <span>

namespace gpusearch {

// A quantile of the last kWindow samples (a ring; nearest rank): the just-in-time cut's aim is
// a quantile of the slowest ISN's compute over the recent batches, not its mean.
class SlidingQuantile {
 public:
  static constexpr std::size_t kWindow = 64;
  void add(double v) {
    ring_[next_] = v;
    next_ = (next_ + 1) % kWindow;
    count_ = std::min(count_ + 1, kWindow);
  }
  std::size_t size() const { return count_; }
  // The smallest sample with at least a share `q` (0 < q <= 1) of the samples at or below it;
  // 0 when empty.
  double quantile(double q) const {
    if (count_ == 0) return 0;
    std::array<double, kWindow> v;
    std::copy(ring_.begin(), ring_.begin() + count_, v.begin());
    const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * double(count_));
    const std::size_t i = std::size_t(std::clamp(rank, 1.0, double(count_))) - 1;
    std::nth_element(v.begin(), v.begin() + i, v.begin() + count_);
    return v[i];
  }

 private:
  std::array<double, kWindow> ring_{};
  std::size_t next_ = 0, count_ = 0;
};

// How one ISN's answer to a batch splits between the cut model's compute and its overhead: the
// engine thread is held for the batch's compute, and for the answer's encoding (end to encoded)
// where that thread encoded it before taking the next batch (the ISN's --answer-thread engine).
// Encoded by another thread (the ISN's MPI thread, the default: the header's encoded_off_engine),
// the engine is free from the search's end, and the encoding is part of the round trip.
struct AnswerSplit {
  double occupancy_us;        // the engine thread held
  double encode_overhead_us;  // the encoding, counted as the round trip's overhead
};
inline AnswerSplit split_answer(double compute_us, double encode_us, bool encoded_off_engine) {
  const double encode = std::max(0.0, encode_us);
  return encoded_off_engine ? AnswerSplit{compute_us, encode} : AnswerSplit{compute_us + encode, 0.0};
}

// Exponentially weighted means of the latencies the pipeline depth is chosen from.
struct LatencyModel {
  double compute_us = 0;   // the slowest ISN's engine thread per batch: engine + encoding
  double overhead_us = 0;  // to the ISN and back (wire, encode, decode), excluding its queue
  // From the later of a batch's send and the previous batch's last answer to its own last
  // answer: when the next answer is due, whether the ISNs work in series or pipelined.
  double service_us = 0;
  // Just in time: the compute the next batch is aimed behind (the cut's aim), a quantile of
  // the slowest ISN's compute over the last batches (BatchMerger keeps the window); 0: the mean.
  double compute_aim_us = 0;
  // Just in time with the admission ahead: a low quantile of the same compute (0: the mean), the
  // answers' early return that the next batch's queries should be ready for.
  double compute_early_us = 0;
  bool seeded = false;
  void add(double compute, double overhead, double service) {
    if (!seeded) {
      compute_us = compute, overhead_us = overhead, service_us = service, seeded = true;
      return;
    }
    compute_us = 0.8 * compute_us + 0.2 * compute;
    overhead_us = 0.8 * overhead_us + 0.2 * overhead;
    service_us = 0.8 * service_us + 0.2 * service;
  }
  // An ISN that finishes a batch must find the next one waiting: batch n + depth - 1 is cut when
  // batch n's answer is back, so depth - 1 compute times must cover one round of overhead; one
  // more batch absorbs the variance.
  std::size_t depth(std::size_t max_depth) const {
    if (!seeded) return 2;
    const double need = 1.0 + std::ceil(overhead_us / std::max(compute_us, 1.0)) + 1.0;
    return std::size_t(std::clamp(need, 1.0, double(std::max<std::size_t>(max_depth, 1))));
  }

  // Just-in-time admission (closed-loop replay, issue 16): when to cut and send the next batch.
  // A batch queued at an ISN behind others adds their compute to its queries' latency and
  // nothing to throughput; one that arrives after the ISN went idle costs throughput. So the
  // next batch should land about when the slowest ISN finishes the batches ahead of it:
  // `offset_us` after that (negative: before). The ISNs work in order, so the answers of the
  // batches in flight (sent at `sent`, oldest first) are predicted one after the other: each at
  // the later of its own send plus the round trip's overhead and the previous answer, plus one
  // compute (an overdue one is taken as due now). The last one, the batch the next would queue
  // behind, takes the aim's compute (`compute_aim_us`, a high quantile of the slowest ISN's
  // compute, where set) instead of the mean: the next batch is cut by then at the latest, and
  // earlier when the answers come back first (the caller cuts at once when none is in flight).
  // The next batch, sent at T, is answered at T + overhead + compute if it does not wait: it
  // should leave at (last answer) - overhead + offset. A time <= now means cut now; so does an
  // unseeded model (nothing measured yet).
  template <typename TimePoint>
  TimePoint just_in_time_cut(TimePoint now, TimePoint last_answer, std::span<const TimePoint> sent,
                             double offset_us) const {
    if (!seeded || sent.empty()) return now;
    return answers_back(now, last_answer, sent) - us<TimePoint>(overhead_us - offset_us);
  }

  // When the answers of the batches in flight are predicted back, the last one at the aim's
  // compute where set (just_in_time_cut's chain; `now` when nothing is in flight or nothing
  // is measured).
  template <typename TimePoint>
  TimePoint answers_back(TimePoint now, TimePoint last_answer,
                         std::span<const TimePoint> sent) const {
    if (!seeded || sent.empty()) return now;
    TimePoint answer = last_answer;
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const double compute =
          i + 1 == sent.size() && compute_aim_us > 0 ? compute_aim_us : compute_us;
      answer = std::max(sent[i] + us<TimePoint>(overhead_us), answer) + us<TimePoint>(compute);
      if (i == 0) answer = std::max(answer, now);  // the oldest overdue: due any moment
    }
    return answer;
  }

  // Just in time (issue 16): how early the next batch may leave, so that its queries are
  // admitted by then and their admission (about 1.4 us a query on the 16-core host: 1.4 ms at
  // batch 1,024) runs while the ISNs compute, not between an ISN going idle and its next batch.
  // The batch leaves at the earlier of the aim's cut (`aimed_cut`) and the moment its cut rule
  // fires once the answers are back, the last batch in flight taking the early compute
  // (`compute_early_us`, a low quantile, where set; else the mean): with the last answer (one
  // ISN, or all-answers), `first_answer_lead_us` before it (the first answer: the mean spread of
  // the ISNs' answers), and then no earlier than `not_before` (predicted-finish: the cut that
  // lands the batch at the slowest ISN as it finishes at its mean compute; min() where none).
  template <typename TimePoint>
  TimePoint expected_cut(TimePoint now, TimePoint last_answer, std::span<const TimePoint> sent,
                         TimePoint aimed_cut, double first_answer_lead_us,
                         TimePoint not_before) const {
    if (!seeded || sent.empty()) return std::min(now, aimed_cut);
    LatencyModel early = *this;
    early.compute_aim_us = compute_early_us;
    const TimePoint first_back =
        early.answers_back(now, last_answer, sent) - us<TimePoint>(first_answer_lead_us);
    return std::min(aimed_cut, std::max(first_back, not_before));
  }

 private:
  template <typename TimePoint>
  static typename TimePoint::duration us(double v) {
    return std::chrono::duration_cast<typename TimePoint::duration>(
        std::chrono::duration<double, std::micro>(v));
  }
};

}  // namespace gpusearch
