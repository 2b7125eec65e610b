// A merge job's answers on their way to the run file, packed: every query id and every hit's
// external id back to back in one buffer, the hits and answers in two arrays. The merge thread
// copies each kept id out of the received message once, into this buffer, instead of into a
// std::string of its own (one heap allocation per id past the small-string buffer, freed again
// on the run writer's thread once the line is written); the run writer formats straight from it.
// Buffers go back and forth between the two threads (RunWriterThread), so a job allocates
// nothing once they have grown.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/result_cache.hpp"
#include "common/error.hpp"

namespace gpusearch {

class PackedAnswers {
 public:
  // Answer number i: query `qid`, arrived as number `sequence`, hits best first.
  struct Answer {
    std::uint64_t sequence;
    std::string_view qid;
    std::span<const HitView> hits;  // views into this PackedAnswers (valid while it is unchanged)
  };

  void add(std::uint64_t sequence, std::string_view qid, std::span<const HitView> hits) {
    Entry e{sequence, append(qid), std::uint32_t(hits_.size()), std::uint32_t(hits.size())};
    for (const HitView& h : hits) hits_.push_back({append(h.docid), h.score});
    answers_.push_back(e);
  }
  void add(std::uint64_t sequence, std::string_view qid, const std::vector<CachedHit>& hits) {
    Entry e{sequence, append(qid), std::uint32_t(hits_.size()), std::uint32_t(hits.size())};
    for (const CachedHit& h : hits) hits_.push_back({append(h.docid), h.score});
    answers_.push_back(e);
  }
  std::size_t size() const { return answers_.size(); }
  bool empty() const { return answers_.empty(); }
  std::size_t hits() const { return hits_.size(); }
  void clear() {  // keeps the capacity
    text_.clear();
    hits_.clear();
    answers_.clear();
    views_.clear();
  }
  // The answers as views; call once all are added (the views point into this object).
  std::span<const Answer> answers() {
    views_.clear();
    views_.reserve(answers_.size());
    hit_views_.resize(hits_.size());
    for (std::size_t h = 0; h < hits_.size(); ++h)
      hit_views_[h] = {text(hits_[h].id), hits_[h].score};
    const std::span<const HitView> all(hit_views_);
    for (const Entry& e : answers_)
      views_.push_back({e.sequence, text(e.qid), all.subspan(e.first_hit, e.hits)});
    return views_;
  }

 private:
  struct Text {
    std::uint32_t begin, size;
  };
  struct Hit {
    Text id;
    double score;
  };
  struct Entry {
    std::uint64_t sequence;
    Text qid;
    std::uint32_t first_hit, hits;
  };
  // Offsets, not views: text_ moves when it grows.
  Text append(std::string_view s) {
    if (text_.size() + s.size() > std::numeric_limits<std::uint32_t>::max())
      throw Error("PackedAnswers: a merge job's ids pass 4 GiB");
    const Text t{std::uint32_t(text_.size()), std::uint32_t(s.size())};
    text_.append(s);
    return t;
  }
  std::string_view text(Text t) const { return std::string_view(text_).substr(t.begin, t.size); }

  std::string text_;
  std::vector<Hit> hits_;
  std::vector<Entry> answers_;
  std::vector<HitView> hit_views_;
  std::vector<Answer> views_;
};

}  // namespace gpusearch
