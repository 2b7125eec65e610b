// The aggregator's RPC front end without MPI: requests become queries of the source with their
// own params, answers and rejections go back to the right client, the per-client and global
// limits refuse (OVERLOADED) instead of queueing, bad ids fail naming the problem, and shutdown
// needs the operator token.
#include <gtest/gtest.h>

#include <sched.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "aggregator/result_cache.hpp"
#include "aggregator/rpc_front_end.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/frontend.capnp.h"

using namespace gpusearch;
namespace fe = gpusearch::wire::frontend;

namespace {

struct Client {
  explicit Client(kj::AsyncIoContext& io, const std::string& address)
      : stream(io.provider->getNetwork().parseAddress(address.c_str()).wait(io.waitScope)
                   ->connect()
                   .wait(io.waitScope)),
        rpc(*stream),
        frontend(rpc.bootstrap().castAs<fe::Frontend>()) {}
  auto search(const std::string& id, const std::string& text, unsigned k = 0,
              unsigned deadline_ms = 0) {
    auto req = frontend.searchRequest();
    auto r = req.initRequest();
    r.setId(id.c_str());
    r.setText(text.c_str());
    r.setK(k);
    r.setDeadlineMs(deadline_ms);
    return req.send();
  }
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyClient rpc;
  fe::Frontend::Client frontend;
};

std::vector<ArrivedQuery> wait_for(RpcQuerySource& s, std::size_t n, kj::WaitScope& ws,
                                   kj::Timer& timer) {
  std::vector<ArrivedQuery> got;
  const auto until = AggregatorClock::now() + std::chrono::seconds(10);
  while (got.size() < n && AggregatorClock::now() < until) {
    s.poll({}, AggregatorClock::now(), 0, got);
    timer.afterDelay(1 * kj::MILLISECONDS).wait(ws);  // lets the client's loop send
  }
  return got;
}

template <typename P>
kj::Exception failure_of(P&& promise, kj::WaitScope& ws) {
  try {
    promise.wait(ws);
  } catch (const kj::Exception& e) {
    return e;
  }
  ADD_FAILURE() << "expected the request to fail";
  return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__);
}

}  // namespace

TEST(RpcFrontEnd, AnswersLimitsAndShutdown) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpusearch-rpc-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  FrontEndOptions o;
  o.listen = "127.0.0.1:0";
  o.max_requests = 3;
  o.max_per_client = 2;
  o.token_file = dir / "token";
  o.address_file = dir / "address";
  SearchParams defaults;
  defaults.k = 10;
  std::atomic<int> wakeups{0};
  auto source = std::make_unique<RpcQuerySource>(o, defaults, [&] { ++wakeups; });
  std::string address;
  std::ifstream(o.address_file) >> address;
  EXPECT_EQ(address, source->bound_address());
  EXPECT_EQ(std::filesystem::status(o.token_file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto& timer = io.provider->getTimer();
  Client a(io, address), b(io, address);

  // Client a: two requests admitted, the third over its per-client limit.
  auto r1 = a.search("q1", "first query", 5);
  auto r2 = a.search("q2", "second query");
  const kj::Exception over = failure_of(a.search("q3", "third"), ws);
  EXPECT_EQ(over.getType(), kj::Exception::Type::OVERLOADED);
  EXPECT_NE(std::string(over.getDescription().cStr()).find("this client has 2"), std::string::npos)
      << over.getDescription().cStr();
  auto got = wait_for(*source, 2, ws, timer);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text.id, "q1");
  EXPECT_EQ(got[0].text.text, "first query");
  ASSERT_TRUE(got[0].params.has_value());
  EXPECT_EQ(got[0].params->k, 5u);   // the request's own k
  EXPECT_EQ(got[1].params->k, 10u);  // the cluster's default
  EXPECT_GT(wakeups.load(), 0);

  // Client b: one more fits the global limit of 3, the next does not.
  auto r4 = b.search("", "fourth query");
  const kj::Exception full = failure_of(b.search("q5", "fifth"), ws);
  EXPECT_EQ(full.getType(), kj::Exception::Type::OVERLOADED);
  EXPECT_NE(std::string(full.getDescription().cStr()).find("on the aggregator"), std::string::npos)
      << full.getDescription().cStr();
  auto got4 = wait_for(*source, 1, ws, timer);
  ASSERT_EQ(got4.size(), 1u);
  EXPECT_EQ(got4[0].text.id.rfind("rpc-", 0), 0u);  // named by the server

  // Answers go to the right clients; a rejection carries its reason.
  CachedAnswer answer{{{"doc7", 3.5}, {"doc2", 1.25}}, true};
  source->answered(got[0].ticket, answer, false, got[0].arrival);
  auto resp = r1.wait(ws).getResponse();
  EXPECT_EQ(std::string(resp.getId().cStr()), "q1");
  ASSERT_EQ(resp.getHits().size(), 2u);
  EXPECT_EQ(std::string(resp.getHits()[0].getDocid().cStr()), "doc7");
  EXPECT_DOUBLE_EQ(resp.getHits()[1].getScore(), 1.25);
  EXPECT_TRUE(resp.getAnsweredByOr());
  EXPECT_FALSE(resp.getPartial());
  source->rejected(got[1].ticket, {"rpc", 0, "q2", "empty query (no tokens)"});
  const kj::Exception rej = failure_of(kj::mv(r2), ws);
  EXPECT_NE(std::string(rej.getDescription().cStr()).find("empty query"), std::string::npos);
  source->answered(got4[0].ticket, {}, true, got4[0].arrival);
  EXPECT_TRUE(r4.wait(ws).getResponse().getPartial());

  // A bad id fails at once, naming the problem.
  const kj::Exception bad = failure_of(a.search("two words", "x"), ws);
  EXPECT_NE(std::string(bad.getDescription().cStr()).find("whitespace"), std::string::npos)
      << bad.getDescription().cStr();

  // Shutdown: refused without the token, accepted with it; then no new request is admitted.
  auto wrong = a.frontend.shutdownRequest();
  wrong.setToken("guess");
  failure_of(wrong.send(), ws);
  EXPECT_FALSE(source->exhausted());
  std::string token;
  std::ifstream(o.token_file) >> token;
  auto right = a.frontend.shutdownRequest();
  right.setToken(token.c_str());
  right.send().wait(ws);
  EXPECT_TRUE(source->exhausted());
  const kj::Exception closed = failure_of(b.search("q6", "late"), ws);
  EXPECT_NE(std::string(closed.getDescription().cStr()).find("shutting down"), std::string::npos);
  const auto stats = source->stats();
  EXPECT_EQ(stats.at("overloaded").get<int>(), 2);
  EXPECT_EQ(stats.at("answered").get<int>(), 2);
  source.reset();
  EXPECT_FALSE(std::filesystem::exists(o.token_file));  // removed with the server
  std::filesystem::remove_all(dir);
}

// --listen unix:PATH: the front end serves on a Unix-domain socket, its bound address is that
// address (a socket has no port), and a client connecting there is answered.
TEST(RpcFrontEnd, ServesOnAUnixSocket) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpusearch-rpc-unix-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  FrontEndOptions o;
  o.listen = "unix:" + (dir / "fe.sock").string();
  o.token_file = dir / "token";
  SearchParams defaults;
  defaults.k = 10;
  auto source = std::make_unique<RpcQuerySource>(o, defaults, [] {});
  EXPECT_EQ(source->bound_address(), o.listen);
  EXPECT_TRUE(std::filesystem::is_socket(dir / "fe.sock"));
  auto io = kj::setupAsyncIo();
  Client c(io, source->bound_address());
  auto r = c.search("u1", "over a unix socket");
  auto got = wait_for(*source, 1, io.waitScope, io.provider->getTimer());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text.text, "over a unix socket");
  source->answered(got[0].ticket, CachedAnswer{{{"doc1", 2.0}}, false}, false, got[0].arrival);
  auto resp = r.wait(io.waitScope).getResponse();
  EXPECT_EQ(std::string(resp.getId().cStr()), "u1");
  ASSERT_EQ(resp.getHits().size(), 1u);
  EXPECT_EQ(std::string(resp.getHits()[0].getDocid().cStr()), "doc1");
  source.reset();
  std::filesystem::remove_all(dir);
}

TEST(RpcFrontEnd, ListenFailureNamesTheAddress) {
  FrontEndOptions o;
  o.listen = "no-port-here";
  try {
    RpcQuerySource s(o, SearchParams{}, [] {});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no-port-here"), std::string::npos) << e.what();
  }
}

// A request's deadline is enforced: when it passes before the answer, the client gets a
// deadline-exceeded answer (no hits, partial) at the deadline; the answer that comes later is
// not sent, and the request counts against the global limit until then (the cluster still runs
// it). A request answered before its deadline is answered as usual.
TEST(RpcFrontEnd, ADeadlineAnswersAtTheDeadline) {
  FrontEndOptions o;
  o.listen = "127.0.0.1:0";
  auto source = std::make_unique<RpcQuerySource>(o, SearchParams{}, [] {});
  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto& timer = io.provider->getTimer();
  Client c(io, source->bound_address());

  const auto t0 = std::chrono::steady_clock::now();
  auto late = c.search("late", "slow query", 0, 150);
  auto soon = c.search("soon", "quick query", 0, 10000);
  auto got = wait_for(*source, 2, ws, timer);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LT(got[0].deadline, AggregatorClock::time_point::max());  // it also cuts its batch
  source->answered(got[1].ticket, {{{"doc1", 2.0}}, false}, false, got[1].arrival);
  auto on_time = soon.wait(ws).getResponse();
  EXPECT_FALSE(on_time.getDeadlineExceeded());
  EXPECT_EQ(on_time.getHits().size(), 1u);

  // Nobody answers "late": its deadline does.
  auto response = late.wait(ws);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto r = response.getResponse();
  EXPECT_TRUE(r.getDeadlineExceeded());
  EXPECT_TRUE(r.getPartial());
  EXPECT_EQ(r.getHits().size(), 0u);
  EXPECT_EQ(std::string(r.getId().cStr()), "late");
  // kj's timer counts from the event loop's time at its last wake-up, which can precede the
  // request's arrival by a fraction of a millisecond (seen once under AddressSanitizer: 149.94).
  EXPECT_GE(ms, 149.0);
  EXPECT_LT(ms, 5000.0);
  EXPECT_GE(r.getServerMicros(), 140000u);
  auto stats = source->stats();
  EXPECT_EQ(stats.at("deadline_exceeded").get<int>(), 1);
  EXPECT_EQ(stats.at("in_flight").get<int>(), 1);  // still in the cluster

  // The cluster's answer comes later: counted, not sent; the request's place is freed.
  source->answered(got[0].ticket, {{{"doc9", 1.0}}, false}, false, got[0].arrival);
  for (int i = 0; i < 1000 && source->stats().at("in_flight").get<int>() != 0; ++i)
    timer.afterDelay(1 * kj::MILLISECONDS).wait(ws);
  stats = source->stats();
  EXPECT_EQ(stats.at("in_flight").get<int>(), 0);
  EXPECT_EQ(stats.at("answered_after_deadline").get<int>(), 1);
  EXPECT_EQ(stats.at("answered").get<int>(), 1);
}

// A request may name its second-stage ranker (issue 12 through the front end): it reaches the
// aggregator as a query file's third column does. A cluster without a ranker store refuses it,
// and a malformed name is refused; neither is admitted.
TEST(RpcFrontEnd, ARequestNamesItsRanker) {
  for (const bool second_stage : {true, false}) {
    FrontEndOptions o;
    o.listen = "127.0.0.1:0";
    o.second_stage = second_stage;
    auto source = std::make_unique<RpcQuerySource>(o, SearchParams{}, [] {});
    auto io = kj::setupAsyncIo();
    auto& ws = io.waitScope;
    auto& timer = io.provider->getTimer();
    Client c(io, source->bound_address());
    const auto with_ranker = [&](const std::string& id, const std::string& ranker) {
      auto req = c.frontend.searchRequest();
      auto r = req.initRequest();
      r.setId(id.c_str());
      r.setText("ranked query");
      r.setRanker(ranker.c_str());
      return req.send();
    };
    if (!second_stage) {
      const kj::Exception e = failure_of(with_ranker("r1", "R-M-BGD"), ws);
      EXPECT_NE(std::string(e.getDescription().cStr()).find("no second stage"), std::string::npos)
          << e.getDescription().cStr();
      EXPECT_EQ(source->stats().at("in_flight").get<int>(), 0);
      continue;
    }
    const kj::Exception bad = failure_of(with_ranker("r0", "a b"), ws);
    EXPECT_NE(std::string(bad.getDescription().cStr()).find("bad ranker name"), std::string::npos)
        << bad.getDescription().cStr();
    auto named = with_ranker("r1", "R-M-BGD");
    auto plain = c.search("r2", "plain query");
    auto got = wait_for(*source, 2, ws, timer);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].text.ranker, "R-M-BGD");
    EXPECT_EQ(got[1].text.ranker, "");  // the cluster's --ranker or mix decides
    source->answered(got[0].ticket, {{{"doc1", 2.0}}, false}, false, got[0].arrival);
    source->answered(got[1].ticket, {{{"doc2", 1.0}}, false}, false, got[1].arrival);
    EXPECT_EQ(named.wait(ws).getResponse().getHits().size(), 1u);
    EXPECT_EQ(plain.wait(ws).getResponse().getHits().size(), 1u);
  }
}

// --rpc-thread: a loop pinned to a CPU (at real-time priority where this process may have it)
// answers every request with its own answer when the answers come from another thread of that
// CPU in bursts, some while the loop sleeps and some while it runs (the eventfd doorbell: a ring
// only after the loop found no task, every task of a ring run). A CPU the process may not use is
// refused at start, naming the flag.
TEST(RpcFrontEnd, APlacedLoopAnswersEveryRequestWithItsOwnAnswer) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  FrontEndOptions o;
  o.listen = "127.0.0.1:0";
  o.loop_thread = {CPU_SETSIZE - 1, false};
  try {
    RpcQuerySource refused(o, SearchParams{}, [] {});
    ADD_FAILURE() << "a CPU outside the process's set was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--rpc-thread: cannot pin to CPU"), std::string::npos)
        << e.what();
  }
  o.loop_thread = {cpu, true};
  std::unique_ptr<RpcQuerySource> source;
  try {
    source = std::make_unique<RpcQuerySource>(o, SearchParams{}, [] {});
  } catch (const std::exception& e) {  // no SCHED_FIFO for this user (CI): pinned only
    EXPECT_NE(std::string(e.what()).find("real-time"), std::string::npos) << e.what();
    o.loop_thread.realtime = false;
    source = std::make_unique<RpcQuerySource>(o, SearchParams{}, [] {});
  }
  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto& timer = io.provider->getTimer();
  Client c(io, source->bound_address());

  constexpr std::size_t kRequests = 60;
  std::vector<capnp::RemotePromise<fe::Frontend::SearchResults>> replies;
  for (std::size_t i = 0; i < kRequests; ++i)
    replies.push_back(c.search("q" + std::to_string(i), "text " + std::to_string(i)));
  const auto got = wait_for(*source, kRequests, ws, timer);
  ASSERT_EQ(got.size(), kRequests);
  std::thread merger([&] {  // as the merge thread: pinned with the loop, answers in bursts
    EXPECT_EQ(place_this_thread({cpu, false}), "");
    std::size_t i = 0;
    for (std::size_t burst = 1; i < got.size(); burst = burst % 5 + 1) {
      for (std::size_t b = 0; b < burst && i < got.size(); ++b, ++i)
        source->answered(got[i].ticket, {{{"doc-" + got[i].text.id, double(i)}}, false}, false,
                         got[i].arrival);
      std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));
    }
  });
  merger.join();  // the loop delivers on its own thread, whatever this one does
  struct Reply {
    std::string id, docid;
    std::size_t hits = 0;
    double score = 0;
  };
  for (std::size_t i = 0; i < kRequests; ++i) {
    auto reply = kj::mv(replies[i]).then([](capnp::Response<fe::Frontend::SearchResults>&& r) {
      auto a = r.getResponse();
      Reply out{a.getId().cStr(), "", a.getHits().size(), 0};
      if (out.hits > 0) {
        out.docid = a.getHits()[0].getDocid().cStr();
        out.score = a.getHits()[0].getScore();
      }
      return out;
    });
    // At most 10 s each: a doorbell that is never rung would hang here otherwise.
    const Reply r = reply
                        .exclusiveJoin(timer.afterDelay(10 * kj::SECONDS).then([]() -> Reply {
                          throw std::runtime_error("no answer within 10 s");
                        }))
                        .wait(ws);
    const std::string id = "q" + std::to_string(i);
    EXPECT_EQ(r.id, id);
    ASSERT_EQ(r.hits, 1u) << id;
    EXPECT_EQ(r.docid, "doc-" + id);
    EXPECT_EQ(r.score, double(i));
  }
  EXPECT_EQ(source->stats().at("answered").get<int>(), int(kRequests));
}
