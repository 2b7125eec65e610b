# The aggregator's live front end (issue 14): Cap'n Proto RPC over TCP (kj event loop), bound to
# 127.0.0.1 unless --listen says otherwise. Each connection's bootstrap capability is its own
# Frontend, so per-client limits hold per connection. Overload is an error (OVERLOADED), never an
# unbounded queue.
@0xc4f1a8e2b7d35960;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gpusearch::wire::frontend");

using Wire = import "messages.capnp";

struct SearchRequest {
  id @0 :Text;            # the query id in the run file; empty: the server names it (rpc-N)
  text @1 :Text;          # query text (tokenized as query files are); or
  terms @2 :List(Text);   # terms, used when text is empty
  # Unset fields take the cluster's defaults (its --mode, --k, --scoring).
  hasMode @3 :Bool;
  mode @4 :Wire.Mode;
  k @5 :UInt32;           # 0: the cluster's
  hasScoring @6 :Bool;
  scoring @7 :Wire.Scoring;
  deadlineMs @8 :UInt32;  # 0: none; else the batch holding it is cut early enough to meet it,
                          # and the answer comes by then: with deadlineExceeded if not merged yet
  ranker @9 :Text;        # second-stage ranker of the cluster's store (as a query file's third
                          # column); empty: the cluster's --ranker or --ranker-mix. Refused by a
                          # cluster without a ranker store; an unknown name is answered by the
                          # first stage and counted as a ranker fallback, as for query files.
}

struct Hit {
  docid @0 :Text;
  score @1 :Float64;
}

struct SearchResponse {
  id @0 :Text;
  hits @1 :List(Hit);
  partial @2 :Bool;        # some ISN missed the deadline: answers from the others only
  answeredByOr @3 :Bool;   # and-or fell back to OR
  serverMicros @4 :UInt64; # arrival at the aggregator to the merged answer (or to the deadline)
  deadlineExceeded @5 :Bool;
  # The request's deadlineMs passed before its answer was merged: answered at the deadline with
  # no hits (partial is set too). The query still runs to the end in the cluster (its run file
  # has it); the late answer is not sent.
}

interface Frontend {
  search @0 (request :SearchRequest) -> (response :SearchResponse);
  # The aggregator's counters so far, as JSON.
  stats @1 () -> (json :Text);
  # Ends the run (answers in flight are finished, run and metrics written). Needs the token the
  # aggregator wrote to its operator token file (readable by its user only).
  shutdown @2 (token :Text) -> ();
}
