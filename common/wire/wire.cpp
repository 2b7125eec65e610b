#include "common/wire/wire.hpp"

#include <cstring>
#include <utility>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "common/wire/messages.capnp.h"

namespace gpusearch::wire {

namespace {

namespace s = schema;

WireBytes flatten(capnp::MessageBuilder& builder) {
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  WireBytes out(words.size());
  std::memcpy(out.data(), words.begin(), words.size() * sizeof(capnp::word));
  return out;
}

// Runs `read` on a reader over `bytes` with the wire's limits; every Cap'n Proto failure (short
// or garbage segments, pointers out of bounds, traversal or nesting limit) becomes WireError.
template <typename Fn>
auto with_reader(std::span<const std::byte> bytes, const char* what, Fn&& read) {
  if (bytes.size() > kMaxWireBytes)
    throw WireError(fmt::format("{}: message of {} bytes exceeds the limit of {}", what,
                                bytes.size(), kMaxWireBytes));
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    throw WireError(
        fmt::format("{}: message of {} bytes is not a whole number of words", what, bytes.size()));
  // MPI buffers are ours and aligned; a caller's span may not be: copy then.
  std::vector<capnp::word> aligned;
  const capnp::word* data = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    aligned.resize(bytes.size() / sizeof(capnp::word));
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    data = aligned.data();
  }
  capnp::ReaderOptions options;
  // Each word may be visited at most twice: defeats amplification through shared pointers.
  options.traversalLimitInWords = 2 * bytes.size() / sizeof(capnp::word) + 64;
  options.nestingLimit = kMaxNestingDepth;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(data, bytes.size() / sizeof(capnp::word)), options);
    return read(reader);
  } catch (const kj::Exception& e) {
    throw WireError(fmt::format("{}: malformed message: {}", what, e.getDescription().cStr()));
  }
}

s::Mode to_wire(Mode m) {
  switch (m) {
    case Mode::kAnd:
      return s::Mode::MODE_AND;
    case Mode::kOr:
      return s::Mode::MODE_OR;
    case Mode::kAndOr:
      return s::Mode::MODE_AND_OR;
  }
  return s::Mode::MODE_OR;
}
Mode from_wire(s::Mode m) {
  switch (m) {
    case s::Mode::MODE_AND:
      return Mode::kAnd;
    case s::Mode::MODE_OR:
      return Mode::kOr;
    case s::Mode::MODE_AND_OR:
      return Mode::kAndOr;
  }
  throw WireError(fmt::format("query batch: unknown mode {}", unsigned(m)));
}
Scoring from_wire(s::Scoring sc) {
  switch (sc) {
    case s::Scoring::BM25:
      return Scoring::kBm25;
    case s::Scoring::BM25_PR:
      return Scoring::kBm25Pr;
  }
  throw WireError(fmt::format("query batch: unknown scoring {}", unsigned(sc)));
}

void put_hits(capnp::List<s::Hit>::Builder out, const std::vector<RankedDoc>& hits,
              const std::vector<std::string>& ids) {
  for (std::size_t i = 0; i < hits.size(); ++i) {
    auto h = out[unsigned(i)];
    h.setScore(hits[i].score);
    h.setRank(hits[i].rank);
    h.setDoc(hits[i].doc);
    if (i < ids.size()) h.setExtId(ids[i]);
  }
}

void get_hits(capnp::List<s::Hit>::Reader in, std::uint32_t shard_id, std::vector<RankedDoc>& hits,
              std::vector<std::string>& ids) {
  if (in.size() > kMaxK) throw WireError(fmt::format("result batch: {} hits, over k", in.size()));
  hits.reserve(in.size());
  ids.reserve(in.size());
  for (auto h : in) {
    hits.push_back({h.getScore(), h.getRank(), shard_id, h.getDoc()});
    ids.emplace_back(h.getExtId().cStr(), h.getExtId().size());
  }
}

}  // namespace

WireBytes encode(const QueryBatch& b) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<s::QueryBatch>();
  root.setBatchId(b.batch_id);
  auto p = root.initParams();
  p.setMode(to_wire(b.params.mode));
  p.setScoring(b.params.scoring == Scoring::kBm25 ? s::Scoring::BM25 : s::Scoring::BM25_PR);
  p.setAlpha(b.params.alpha);
  p.setK(b.params.k);
  auto qs = root.initQueries(unsigned(b.queries.size()));
  for (std::size_t i = 0; i < b.queries.size(); ++i) {
    qs[unsigned(i)].setId(b.queries[i].id);
    auto ts = qs[unsigned(i)].initTerms(unsigned(b.queries[i].terms.size()));
    for (std::size_t t = 0; t < b.queries[i].terms.size(); ++t)
      ts.set(unsigned(t), b.queries[i].terms[t]);
  }
  return flatten(builder);
}

QueryBatch decode_query_batch(std::span<const std::byte> bytes) {
  return with_reader(bytes, "query batch", [](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<s::QueryBatch>();
    QueryBatch b;
    b.batch_id = root.getBatchId();
    const auto p = root.getParams();
    b.params.mode = from_wire(p.getMode());
    b.params.scoring = from_wire(p.getScoring());
    b.params.alpha = p.getAlpha();
    b.params.k = p.getK();
    if (b.params.k == 0 || b.params.k > kMaxK)
      throw WireError(fmt::format("query batch: k = {} out of range", b.params.k));
    if (!(b.params.alpha >= 0.0 && b.params.alpha <= 1.0))
      throw WireError("query batch: alpha out of [0, 1]");
    const auto qs = root.getQueries();
    if (qs.size() > kMaxBatchQueries)
      throw WireError(fmt::format("query batch: {} queries, over {}", qs.size(), kMaxBatchQueries));
    b.queries.reserve(qs.size());
    for (auto q : qs) {
      WireQuery wq;
      wq.id.assign(q.getId().cStr(), q.getId().size());
      const auto ts = q.getTerms();
      if (ts.size() > kMaxQueryTerms)
        throw WireError(fmt::format("query batch: query '{}' has {} terms", wq.id, ts.size()));
      for (auto t : ts) wq.terms.emplace_back(t.cStr(), t.size());
      b.queries.push_back(std::move(wq));
    }
    return b;
  });
}

WireBytes encode(const ResultBatch& b) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<s::ResultBatch>();
  root.setBatchId(b.batch_id);
  root.setIsnRank(b.isn_rank);
  root.setShardId(b.shard_id);
  root.setComputeUs(b.compute_us);
  root.setIdleUs(b.idle_us);
  root.setFallbackActive(b.fallback_active);
  root.setError(b.error);
  auto rs = root.initResults(unsigned(b.answers.size()));
  for (std::size_t i = 0; i < b.answers.size(); ++i) {
    const ShardAnswer& a = b.answers[i];
    auto r = rs[unsigned(i)];
    put_hits(r.initHits(unsigned(a.result.hits.size())), a.result.hits, a.hit_ids);
    put_hits(r.initOrHits(unsigned(a.result.or_hits.size())), a.result.or_hits, a.or_hit_ids);
    r.setAndMatches(a.result.and_matches);
    r.setPartial(a.result.partial);
    auto c = r.initCounters();
    c.setPostingsDecoded(a.result.counters.postings_decoded);
    c.setBlocksDecoded(a.result.counters.blocks_decoded);
    c.setBlocksSkipped(a.result.counters.blocks_skipped);
    c.setDocsScored(a.result.counters.docs_scored);
    c.setEarlyTerminations(a.result.counters.early_terminations);
  }
  return flatten(builder);
}

ResultBatch decode_result_batch(std::span<const std::byte> bytes) {
  return with_reader(bytes, "result batch", [](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<s::ResultBatch>();
    ResultBatch b;
    b.batch_id = root.getBatchId();
    b.isn_rank = root.getIsnRank();
    b.shard_id = root.getShardId();
    b.compute_us = root.getComputeUs();
    b.idle_us = root.getIdleUs();
    b.fallback_active = root.getFallbackActive();
    b.error.assign(root.getError().cStr(), root.getError().size());
    const auto rs = root.getResults();
    if (rs.size() > kMaxBatchQueries)
      throw WireError(
          fmt::format("result batch: {} results, over {}", rs.size(), kMaxBatchQueries));
    b.answers.resize(rs.size());
    for (unsigned i = 0; i < rs.size(); ++i) {
      const auto r = rs[i];
      ShardAnswer& a = b.answers[i];
      get_hits(r.getHits(), b.shard_id, a.result.hits, a.hit_ids);
      get_hits(r.getOrHits(), b.shard_id, a.result.or_hits, a.or_hit_ids);
      a.result.and_matches = r.getAndMatches();
      a.result.partial = r.getPartial();
      const auto c = r.getCounters();
      a.result.counters = {c.getPostingsDecoded(), c.getBlocksDecoded(), c.getBlocksSkipped(),
                           c.getDocsScored(), c.getEarlyTerminations()};
    }
    return b;
  });
}

WireBytes encode(const Control& c) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<s::Control>();
  switch (c.kind) {
    case Control::Kind::kHello:
      root.setHello(c.payload);
      break;
    case Control::Kind::kStatsRequest:
      root.setStatsRequest();
      break;
    case Control::Kind::kStatsReply:
      root.setStatsReply(c.payload);
      break;
    case Control::Kind::kShutdown:
      root.setShutdown();
      break;
    case Control::Kind::kRankerCache:
      root.initRankerCache().setOp(c.payload);
      break;
  }
  return flatten(builder);
}

Control decode_control(std::span<const std::byte> bytes) {
  return with_reader(bytes, "control message", [](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<s::Control>();
    Control c;
    switch (root.which()) {
      case s::Control::HELLO:
        c.kind = Control::Kind::kHello;
        c.payload.assign(root.getHello().cStr(), root.getHello().size());
        break;
      case s::Control::STATS_REQUEST:
        c.kind = Control::Kind::kStatsRequest;
        break;
      case s::Control::STATS_REPLY:
        c.kind = Control::Kind::kStatsReply;
        c.payload.assign(root.getStatsReply().cStr(), root.getStatsReply().size());
        break;
      case s::Control::SHUTDOWN:
        c.kind = Control::Kind::kShutdown;
        break;
      case s::Control::RANKER_CACHE:
        c.kind = Control::Kind::kRankerCache;
        c.payload.assign(root.getRankerCache().getOp().cStr(),
                         root.getRankerCache().getOp().size());
        break;
      default:
        throw WireError("control message: unknown kind");
    }
    return c;
  });
}

}  // namespace gpusearch::wire
