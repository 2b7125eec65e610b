# The wire between the aggregator and the ISNs (ARCHITECTURE.md: aggregator/ and isn/ meet only
# here). Every message travels as one flat Cap'n Proto array in one MPI message; the MPI tag
# says which root struct it is (common/wire/mpi_transport.hpp).
@0x84bb74900738df4a;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gpusearch::wire::schema");

enum Mode { modeAnd @0; modeOr @1; modeAndOr @2; }
enum Scoring { bm25 @0; bm25Pr @1; }

struct SearchParams {
  mode @0 :Mode;
  scoring @1 :Scoring;
  alpha @2 :Float64;
  k @3 :UInt32;
}

# Terms travel as normalized strings (tokenized, de-duplicated, unknown terms dropped, in query
# order): each ISN resolves them against its own shard's lexicon, and the order is the order
# scores are summed in.
struct Query {
  id @0 :Text;
  terms @1 :List(Text);
}

struct QueryBatch {
  batchId @0 :UInt64;
  params @1 :SearchParams;
  queries @2 :List(Query);
}

struct Hit {
  score @0 :Float64;
  rank @1 :UInt32;    # collection-wide GS rank: the tie-break key
  doc @2 :UInt32;     # shard-local docID
  extId @3 :Text;     # external document id, so the aggregator needs no shard data
}

struct Counters {
  postingsDecoded @0 :UInt64;
  blocksDecoded @1 :UInt64;
  blocksSkipped @2 :UInt64;
  docsScored @3 :UInt64;
  earlyTerminations @4 :UInt64;
}

struct QueryResult {
  hits @0 :List(Hit);
  andMatches @1 :UInt64;
  orHits @2 :List(Hit);
  counters @3 :Counters;
  partial @4 :Bool;
}

struct ResultBatch {
  batchId @0 :UInt64;
  isnRank @1 :UInt32;
  shardId @2 :UInt32;
  computeUs @3 :UInt64;       # the ISN's time for this batch (engine, incl. fallback reruns)
  fallbackActive @4 :Bool;    # answered by the fallback engine
  results @5 :List(QueryResult);
  error @6 :Text;             # non-empty: the ISN could not answer this batch at all
  idleUs @7 :UInt64;          # the ISN's wait for this batch since it finished its previous one
}

# Placeholder for the GPU ranker cache coordination of paper 004 (not implemented yet).
struct RankerCacheCommand {
  op @0 :Text;
  key @1 :Data;
}

struct Control {
  union {
    hello @0 :Text;          # ISN -> aggregator at start: JSON (shard, docID range, memory)
    statsRequest @1 :Void;
    statsReply @2 :Text;     # ISN -> aggregator: JSON
    shutdown @3 :Void;
    rankerCache @4 :RankerCacheCommand;
  }
}
