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
  candidates @4 :UInt32;  # two-stage ranking: first-stage candidates per shard (0: one stage)
}

# A query's terms, tokenized, de-duplicated, unknown terms dropped, in query order (the order
# scores are summed in). Where every shard carries the same global vocabulary (the aggregator
# checks each ISN's vocabulary fingerprint at hello) they travel as term IDs, resolved once at
# the aggregator; otherwise as normalized strings that each ISN resolves against its lexicon.
struct Query {
  id @0 :Text;
  terms @1 :List(Text);
  termIds @2 :List(UInt32);
  ranker @3 :Text;  # second-stage ranker of the store ("" : the first stage's order)
}

struct QueryBatch {
  batchId @0 :UInt64;
  params @1 :SearchParams;
  queries @2 :List(Query);
}

# A batch's answers from one ISN, packed column by column: one list per field for all hits of
# the batch rather than one struct (and one text pointer) per hit, so that encoding, the bytes
# on the wire and decoding grow with the data, not with pointer chasing. Query q's AND (or only)
# hits come first, then its OR hits (and-or), each list best first; hitCounts holds the two
# lengths per query.
struct ResultBatch {
  batchId @0 :UInt64;
  isnRank @1 :UInt32;
  shardId @2 :UInt32;
  computeUs @3 :UInt64;       # the ISN's time for this batch (engine, incl. fallback reruns)
  fallbackActive @4 :Bool;    # answered by the fallback engine
  error @5 :Text;             # non-empty: the ISN could not answer this batch at all
  idleUs @6 :UInt64;          # the ISN's engine waited this long for this batch

  # The batch's life at the ISN, on the ISN's steady clock in microseconds (the aggregator maps
  # them onto its own clock with the offset measured at start): the message received, the engine
  # started and finished, the answer encoded and handed to MPI.
  receivedUs @7 :UInt64;
  startUs @8 :UInt64;
  endUs @9 :UInt64;
  encodedUs @10 :UInt64;

  hitCounts @11 :List(UInt32);   # 2 per query: hits, OR hits
  scores @12 :List(Float64);
  ranks @13 :List(UInt32);       # collection-wide GS rank: the tie-break key
  docs @14 :List(UInt32);        # shard-local docIDs
  extIdEnds @15 :List(UInt32);   # hit i's external id is extIds[extIdEnds[i-1] .. extIdEnds[i])
  extIds @16 :Data;
  andMatches @17 :List(UInt64);  # per query
  partial @18 :List(Bool);       # per query
  counters @19 :List(UInt64);    # 5 per query: postings decoded, blocks decoded, blocks
                                 # skipped, docs scored, early terminations
  rankerFallback @20 :List(Bool);  # per query: its ranker failed, the first stage answered
  encodedOffEngine @21 :Bool;    # encoded by another thread: the engine was free from endUs on
}

# The aggregator's ranker-cache coordination (paper 004, 3.6; aggregator/ranker_cache_coordinator.hpp):
# before batch `batchId` the ISN evicts, then loads, the named rankers of its store, so that the
# batch's rankers are resident when it is ranked. An ISN applies a command just before it ranks
# the batch it names (commands and batches arrive in the order sent).
struct RankerCacheCommand {
  batchId @0 :UInt64;
  evict @1 :List(Text);
  load @2 :List(Text);
}

struct Control {
  union {
    hello @0 :Text;          # ISN -> aggregator at start: JSON (shard, docID range, memory)
    statsRequest @1 :Void;
    statsReply @2 :Text;     # ISN -> aggregator: JSON
    shutdown @3 :Void;
    rankerCache @4 :RankerCacheCommand;
    clockPing @5 :UInt64;    # aggregator -> ISN: a sequence number; the ISN answers at once
    clockPong @6 :UInt64;    # ISN -> aggregator: its steady clock (us) when the ping arrived
  }
}
