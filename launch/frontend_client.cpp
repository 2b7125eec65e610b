#include "launch/frontend_client.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <algorithm>
#include <random>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <fmt/format.h>
#include <kj/async-io.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/metrics.hpp"
#include "common/query.hpp"
#include "common/run_file.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/frontend.capnp.h"
#include "common/wire/rpc_polling.hpp"

namespace gpusearch {

namespace {

namespace fe = wire::frontend;
using Clock = std::chrono::steady_clock;

// A connection to the front end on this thread's event loop.
struct FrontendConnection {
  explicit FrontendConnection(const std::string& connect)
      : io(kj::setupAsyncIo()),
        stream(open(io, connect)),
        client(*stream),
        frontend(client.bootstrap().castAs<fe::Frontend>()) {}
  static kj::Own<kj::AsyncIoStream> open(kj::AsyncIoContext& io, const std::string& connect) {
    try {
      auto addr = io.provider->getNetwork().parseAddress(connect.c_str()).wait(io.waitScope);
      return addr->connect().wait(io.waitScope);
    } catch (const kj::Exception& e) {
      throw InputError("--connect " + connect, 0,
                       fmt::format("cannot connect: {}", e.getDescription().cStr()));
    }
  }
  kj::AsyncIoContext io;
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyClient client;
  fe::Frontend::Client frontend;
};

void fill_request(fe::SearchRequest::Builder r, const std::string& id, const std::string& text,
                  const std::string& mode, const std::string& scoring, unsigned k,
                  unsigned deadline_ms, const std::string& ranker) {
  r.setId(id.c_str());
  r.setText(text.c_str());
  if (!mode.empty()) {
    r.setHasMode(true);
    const Mode m = parse_mode(mode);
    r.setMode(m == Mode::kAnd  ? wire::schema::Mode::MODE_AND
              : m == Mode::kOr ? wire::schema::Mode::MODE_OR
                               : wire::schema::Mode::MODE_AND_OR);
  }
  if (!scoring.empty()) {
    r.setHasScoring(true);
    r.setScoring(parse_scoring(scoring) == Scoring::kBm25 ? wire::schema::Scoring::BM25
                                                          : wire::schema::Scoring::BM25_PR);
  }
  r.setK(k);
  r.setDeadlineMs(deadline_ms);
  if (!ranker.empty()) r.setRanker(ranker.c_str());
}

RpcPolling polling_of(const std::string& mode, unsigned spin_us) {
  RpcPolling p;
  p.mode = parse_rpc_poll_mode(mode);
  p.spin = std::chrono::microseconds(spin_us);
  return p;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The server's event-loop CPU seconds from its stats (the aggregator's front end and
// bench_rpc_floor report it); negative when it does not say.
double server_loop_cpu_seconds(fe::Frontend::Client& frontend, LoopPoller& poller) {
  try {
    auto resp = poller.wait(frontend.statsRequest().send(), [] { return true; });
    const auto j = nlohmann::json::parse(resp.getJson().cStr());
    return j.value("loop_cpu_s", -1.0);
  } catch (const std::exception&) {
    return -1;
  } catch (const kj::Exception&) {
    return -1;
  }
}

std::string kind_of(const kj::Exception& e) {
  switch (e.getType()) {
    case kj::Exception::Type::OVERLOADED: return "overloaded";
    case kj::Exception::Type::DISCONNECTED: return "disconnected";
    case kj::Exception::Type::UNIMPLEMENTED: return "unimplemented";
    default: return "failed";
  }
}

}  // namespace

int run_query_command(const QueryCommand& c) {
  const RpcPolling polling = polling_of(c.rpc_poll, c.rpc_spin_us);
  FrontendConnection conn(c.connect);
  LoopPoller poller(conn.io.waitScope, polling);
  const auto waiting = [] { return true; };
  try {
    if (c.shutdown) {
      std::ifstream f(c.token_file);
      std::string token;
      if (!(f >> token))
        throw InputError(c.token_file.string(), 0, "cannot read the operator token");
      auto req = conn.frontend.shutdownRequest();
      req.setToken(token.c_str());
      poller.wait(req.send(), waiting);
      fmt::print("shutdown requested; the cluster finishes the answers in flight and writes its "
                 "run and metrics\n");
      return 0;
    }
    if (c.stats) {
      auto resp = poller.wait(conn.frontend.statsRequest().send(), waiting);
      fmt::print("{}\n", nlohmann::json::parse(resp.getJson().cStr()).dump(2));
      return 0;
    }
    if (c.text.empty()) throw InputError("query", 0, "give the query text");
    auto req = conn.frontend.searchRequest();
    fill_request(req.initRequest(), c.id, c.text, c.mode, c.scoring, c.k, c.deadline_ms, c.ranker);
    const auto t0 = Clock::now();
    // The response owns the message its reader points into: keep it alive (ASan found this).
    const auto response = poller.wait(req.send(), waiting);
    const auto resp = response.getResponse();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    fmt::print("query {}: {} hits{}{}{} ({:.3f} ms, {:.3f} ms in the cluster)\n",
               resp.getId().cStr(), resp.getHits().size(),
               resp.getDeadlineExceeded() ? ", DEADLINE EXCEEDED" : "",
               resp.getPartial() && !resp.getDeadlineExceeded() ? ", PARTIAL" : "",
               resp.getAnsweredByOr() ? ", answered by OR" : "", ms,
               double(resp.getServerMicros()) / 1000.0);
    unsigned rank = 0;
    for (auto h : resp.getHits())
      fmt::print("{:4d}  {:<24} {:.6f}\n", ++rank, h.getDocid().cStr(), h.getScore());
    return 0;
  } catch (const kj::Exception& e) {
    fmt::print(stderr, "gpusearch query: {}: {}\n", kind_of(e), e.getDescription().cStr());
    return 1;
  }
}

int run_load_command(const LoadCommand& c) {
  if (!(c.qps > 0)) throw InputError("--qps", 0, "must be above 0");
  if (!(c.duration_s > 0)) throw InputError("--duration", 0, "must be above 0");
  const QueryFile qf = read_query_file(c.queries);
  if (qf.queries.empty()) throw InputError(c.queries.string(), 0, "no queries");
  std::ofstream run;
  if (!c.run_path.empty()) {
    run.open(c.run_path);
    if (!run) throw InputError(c.run_path.string(), 0, "cannot write run file");
  }

  const RpcPolling polling = polling_of(c.rpc_poll, c.rpc_spin_us);
  const ThreadPlacement placement = parse_thread_placement(c.rpc_thread, "--rpc-thread");
  if (std::string why = place_this_thread(placement); !why.empty())
    throw Error("--rpc-thread: " + why);
  FrontendConnection conn(c.connect);
  LoopPoller poller(conn.io.waitScope, polling);
  kj::Timer& timer = conn.io.provider->getTimer();
  std::size_t outstanding = 0;  // sent, neither answered nor failed
  const auto awaiting_answers = [&outstanding] { return outstanding > 0; };
  const double server_cpu_before = server_loop_cpu_seconds(conn.frontend, poller);
  const double client_cpu_before = process_cpu_seconds();

  struct Outcome {
    std::string id;
    std::vector<std::pair<std::string, double>> hits;
    std::string error;  // kind; empty: answered
    double latency_ms = -1;  // from the scheduled arrival to the answer
    double server_ms = 0;
    double added_ms = 0;  // from the actual send to the answer, less the cluster's own time
    bool partial = false;
    bool deadline_exceeded = false;
  };
  std::vector<Outcome> out;
  std::string first_error;
  struct Handler : kj::TaskSet::ErrorHandler {
    void taskFailed(kj::Exception&&) override {}
  } handler;
  kj::TaskSet tasks(handler);
  std::mt19937_64 rng(c.seed);
  std::exponential_distribution<double> gap(c.qps);
  const std::size_t expected = std::size_t(c.qps * c.duration_s * 1.2) + 16;
  out.reserve(c.limit ? std::min(c.limit, expected) : expected);

  const auto t0 = Clock::now();
  const kj::TimePoint k0 = timer.now();
  double t = 0;
  std::size_t sent = 0;
  Clock::time_point last_send = t0, last_answer = t0;
  while (t < c.duration_s && (c.limit == 0 || sent < c.limit)) {
    poller.wait(timer.atTime(k0 + std::int64_t(t * 1e9) * kj::NANOSECONDS), awaiting_answers);
    const QueryText& q = qf.queries[sent % qf.queries.size()];
    const std::size_t pass = sent / qf.queries.size();
    const std::size_t slot = out.size();
    out.push_back({c.id_prefix + (pass == 0 ? q.id : fmt::format("{}~{}", q.id, pass)), {}, "", -1,
                   0, 0, false, false});
    auto req = conn.frontend.searchRequest();
    fill_request(req.initRequest(), out[slot].id, q.text, c.mode, c.scoring, c.k, c.deadline_ms,
                 q.ranker.empty() ? c.ranker : q.ranker);
    const auto scheduled = t0 + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(t));
    // kj's timer reads the clock once per event-loop turn: the send can come a little before
    // the steady clock's scheduled time; latency counts from whichever is earlier.
    const auto send_time = Clock::now();
    const auto start = std::min(scheduled, send_time);
    last_send = send_time;
    ++outstanding;
    poller.note_activity();
    tasks.add(req.send().then(
        [&out, &last_answer, &outstanding, &poller, slot, start,
         send_time](capnp::Response<fe::Frontend::SearchResults>&& r) {
          const auto now = Clock::now();
          --outstanding;
          poller.note_activity();
          last_answer = std::max(last_answer, now);
          auto resp = r.getResponse();
          Outcome& o = out[slot];
          o.latency_ms = std::chrono::duration<double, std::milli>(now - start).count();
          o.server_ms = double(resp.getServerMicros()) / 1000.0;
          o.added_ms = std::chrono::duration<double, std::milli>(now - send_time).count() -
                       o.server_ms;
          o.partial = resp.getPartial();
          o.deadline_exceeded = resp.getDeadlineExceeded();
          for (auto h : resp.getHits()) o.hits.emplace_back(h.getDocid().cStr(), h.getScore());
        },
        [&out, &first_error, &outstanding, slot](kj::Exception&& e) {
          --outstanding;
          out[slot].error = kind_of(e);
          if (first_error.empty()) first_error = e.getDescription().cStr();
        }));
    ++sent;
    t += c.poisson ? gap(rng) : 1.0 / c.qps;
  }
  const double send_window_s = std::chrono::duration<double>(last_send - t0).count();
  // Answers still on their way: wait for them, up to the drain time.
  poller.wait(tasks.onEmpty().exclusiveJoin(
                  timer.afterDelay(std::int64_t(c.drain_s * 1e9) * kj::NANOSECONDS)),
              awaiting_answers);
  const double client_cpu_s = process_cpu_seconds() - client_cpu_before;
  const double server_cpu_after = server_loop_cpu_seconds(conn.frontend, poller);

  std::vector<double> latency, server, added;
  std::uint64_t answered = 0, partial = 0, unanswered = 0, deadline_exceeded = 0;
  std::map<std::string, std::uint64_t> errors;
  for (const Outcome& o : out) {
    if (!o.error.empty()) {
      ++errors[o.error];
    } else if (o.latency_ms < 0) {
      ++unanswered;
    } else if (o.deadline_exceeded) {
      ++deadline_exceeded;  // a reply at the deadline: no results, not in the latency samples
    } else {
      ++answered;
      if (o.partial) ++partial;
      latency.push_back(o.latency_ms);
      server.push_back(o.server_ms);
      added.push_back(o.added_ms);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Throughput over the time the answers took: from the first arrival to the last answer.
  const double answer_window_s = std::chrono::duration<double>(last_answer - t0).count();
  nlohmann::json errors_json = nlohmann::json::object();
  for (auto& [k, v] : errors) errors_json[k] = v;
  errors_json["unanswered"] = unanswered;
  const nlohmann::json m = {
      {"connect", c.connect},
      {"queries_file", c.queries.string()},
      {"arrivals", c.poisson ? "poisson" : "uniform"},
      {"target_qps", c.qps},
      {"duration_s", c.duration_s},
      {"seed", c.seed},
      {"sent", sent},
      {"offered_qps", send_window_s > 0 ? double(sent - 1) / send_window_s : 0.0},
      {"answered", answered},
      {"partial", partial},
      {"deadline_exceeded", deadline_exceeded},
      {"errors", errors_json},
      {"first_error", first_error},
      {"throughput_qps", answer_window_s > 0 ? double(answered) / answer_window_s : 0.0},
      {"seconds", seconds},
      {"latency_ms", metrics::summarize(latency)},
      {"server_ms", metrics::summarize(server)},
      {"added_ms", metrics::summarize(added)},
      {"rpc_poll", rpc_poll_mode_name(polling.mode)},
      {"rpc_thread", c.rpc_thread},
      {"rpc_spin_us", c.rpc_spin_us},
      {"client_cpu_s", client_cpu_s},
      {"server_loop_cpu_s", server_cpu_before >= 0 && server_cpu_after >= 0
                                ? nlohmann::json(server_cpu_after - server_cpu_before)
                                : nlohmann::json(nullptr)},
      {"latency_definition",
       "latency_ms: scheduled arrival to answer (open loop); server_ms: arrival at the "
       "aggregator to merged answer; added_ms: send to answer less server_ms (the RPC front "
       "end's own cost, both ways); answered requests only (deadline_exceeded replies are "
       "counted apart)"}};
  if (run.is_open()) {
    for (const Outcome& o : out)
      for (std::size_t i = 0; i < o.hits.size(); ++i)
        write_run_line(run, o.id, o.hits[i].first, int(i + 1), o.hits[i].second, c.tag);
    run.close();
    if (!run) throw Error("write failed: " + c.run_path.string());
  }
  if (!c.metrics_path.empty()) {
    std::ofstream f(c.metrics_path);
    f << m.dump(2) << '\n';
    if (!f) throw Error("cannot write " + c.metrics_path.string());
  }
  const auto& l = m.at("latency_ms");
  fmt::print(
      "load: {} sent at {:.0f}/s ({}), {} answered ({} partial), {} deadline exceeded, errors: "
      "{}\n"
      "  throughput {:.0f} queries/s; latency p50 {:.2f} ms, p95 {:.2f} ms, p99 {:.2f} ms, max "
      "{:.2f} ms; RPC added p50 {:.3f} ms\n",
      sent, m.at("offered_qps").get<double>(), c.poisson ? "Poisson" : "uniform", answered,
      partial, deadline_exceeded, errors_json.dump(), m.at("throughput_qps").get<double>(), l.value("p50", 0.0),
      l.value("p95", 0.0), l.value("p99", 0.0), l.value("max", 0.0),
      m.at("added_ms").value("p50", 0.0));
  if (!first_error.empty()) fmt::print("  first error: {}\n", first_error);
  // A deadline-exceeded reply is an answer the client asked for, not a failure.
  return answered + deadline_exceeded == sent ? 0 : 1;
}

}  // namespace gpusearch
