// --rpc-poll (common/wire/rpc_poll_mode.hpp): a bad mode is refused naming the flag and the
// choices; in every mode the front end gives each client its own answer, answers that come after
// the adaptive loop fell asleep still go out, the loop stops when asked, and the modes differ
// where they should (an idle spinning loop burns CPU, a blocking or adaptive one does not).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/vector.h>

#include "aggregator/result_cache.hpp"
#include "aggregator/rpc_front_end.hpp"
#include "common/error.hpp"
#include "common/wire/frontend.capnp.h"
#include "common/wire/rpc_polling.hpp"

using namespace gpusearch;
namespace fe = gpusearch::wire::frontend;

TEST(RpcPolling, ModesParseAndBadOnesAreRefusedNamingTheFlag) {
  EXPECT_EQ(parse_rpc_poll_mode("block"), RpcPollMode::kBlock);
  EXPECT_EQ(parse_rpc_poll_mode("adaptive"), RpcPollMode::kAdaptive);
  EXPECT_EQ(parse_rpc_poll_mode("spin"), RpcPollMode::kSpin);
  for (RpcPollMode m : {RpcPollMode::kBlock, RpcPollMode::kAdaptive, RpcPollMode::kSpin})
    EXPECT_EQ(parse_rpc_poll_mode(rpc_poll_mode_name(m)), m);
  for (const char* bad : {"", "Spin", "busy", "spin "}) {
    try {
      parse_rpc_poll_mode(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--rpc-poll"), std::string::npos) << what;
      EXPECT_NE(what.find("expected block, adaptive or spin"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(RpcPolling{}.mode, RpcPollMode::kBlock);  // the documented default
}

namespace {

// What the fake cluster answers for a query: hits derived from its text, so that a reply sent to
// the wrong request, or lost, shows.
CachedAnswer answer_for(const std::string& text) {
  CachedAnswer a;
  for (int i = 0; i < 3; ++i) a.hits.push_back({text + "-doc" + std::to_string(i), 10.0 - i});
  return a;
}

// Serves `n` requests from a client under `client_mode` against a front end under `server_mode`;
// a "merge thread" answers each from another thread after a delay (some past the adaptive spin
// time, so that the loop has gone to sleep). Checks every reply; returns the front end's stats.
nlohmann::json serve_and_check(RpcPollMode server_mode, RpcPollMode client_mode, int n) {
  FrontEndOptions o;
  o.listen = "127.0.0.1:0";
  o.polling.mode = server_mode;
  o.polling.spin = std::chrono::microseconds(2000);
  SearchParams defaults;
  defaults.k = 10;
  RpcQuerySource source(o, defaults, [] {});

  std::atomic<bool> done{false};
  std::thread merger([&] {  // plays the merge thread: answers in arrival order
    int answered = 0;
    std::vector<ArrivedQuery> got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (answered < n && !done && std::chrono::steady_clock::now() < until) {
      got.clear();
      source.poll({}, AggregatorClock::now(), 0, got);
      for (const ArrivedQuery& q : got) {
        // 0, 1 or 8 ms: within the spin time, near it, past it (the loop asleep).
        std::this_thread::sleep_for(
            std::chrono::milliseconds(answered % 3 == 2 ? 8 : answered % 3));
        source.answered(q.ticket, answer_for(q.text.text), false, q.arrival);
        ++answered;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });

  auto io = kj::setupAsyncIo();
  RpcPolling cp;
  cp.mode = client_mode;
  cp.spin = std::chrono::microseconds(2000);
  LoopPoller poller(io.waitScope, cp);
  auto stream = io.provider->getNetwork()
                    .parseAddress(source.bound_address().c_str())
                    .wait(io.waitScope)
                    ->connect()
                    .wait(io.waitScope);
  capnp::TwoPartyClient rpc(*stream);
  auto frontend = rpc.bootstrap().castAs<fe::Frontend>();
  int outstanding = 0;
  kj::Vector<kj::Promise<void>> replies;
  for (int i = 0; i < n; ++i) {
    const std::string id = "q" + std::to_string(i);
    const std::string text = "text" + std::to_string(i * 7);
    auto req = frontend.searchRequest();
    req.initRequest().setId(id.c_str());
    req.getRequest().setText(text.c_str());
    ++outstanding;
    replies.add(req.send().then([id, text, &outstanding](auto&& r) {
      --outstanding;
      auto resp = r.getResponse();
      EXPECT_EQ(std::string(resp.getId().cStr()), id);
      const CachedAnswer want = answer_for(text);
      ASSERT_EQ(resp.getHits().size(), want.hits.size()) << id;
      for (unsigned h = 0; h < want.hits.size(); ++h) {
        EXPECT_EQ(std::string(resp.getHits()[h].getDocid().cStr()), want.hits[h].docid) << id;
        EXPECT_DOUBLE_EQ(resp.getHits()[h].getScore(), want.hits[h].score) << id;
      }
    }));
    if (i % 4 == 3)  // some requests one at a time, some four together
      poller.wait(kj::joinPromises(replies.releaseAsArray()), [&] { return outstanding > 0; });
  }
  auto timer_fired = io.provider->getTimer().afterDelay(30 * kj::SECONDS).then([] {
    ADD_FAILURE() << "replies did not arrive in 30 s";
  });
  poller.wait(kj::joinPromises(replies.releaseAsArray()).exclusiveJoin(kj::mv(timer_fired)),
              [&] { return outstanding > 0; });
  auto stats = nlohmann::json::parse(
      poller.wait(frontend.statsRequest().send(), [] { return true; }).getJson().cStr());
  done = true;
  merger.join();
  return stats;  // the source stops (in every mode) when it goes out of scope
}

}  // namespace

TEST(RpcPolling, EveryModeAnswersEachRequestWithItsOwnAnswer) {
  const RpcPollMode modes[] = {RpcPollMode::kBlock, RpcPollMode::kAdaptive, RpcPollMode::kSpin};
  for (RpcPollMode server : modes)
    for (RpcPollMode client : modes) {
      SCOPED_TRACE(std::string("server ") + rpc_poll_mode_name(server) + ", client " +
                   rpc_poll_mode_name(client));
      const auto stats = serve_and_check(server, client, 12);
      EXPECT_EQ(stats.at("answered").get<int>(), 12);
      EXPECT_EQ(stats.at("rpc_poll").get<std::string>(), rpc_poll_mode_name(server));
      EXPECT_GT(stats.at("loop_cpu_s").get<double>(), 0.0);
    }
}

TEST(RpcPolling, OnlyASpinningLoopBurnsCpuWhenIdle) {
  for (RpcPollMode mode : {RpcPollMode::kBlock, RpcPollMode::kAdaptive, RpcPollMode::kSpin}) {
    FrontEndOptions o;
    o.listen = "127.0.0.1:0";
    o.polling.mode = mode;
    RpcQuerySource source(o, SearchParams{}, [] {});
    const double before = source.stats().at("loop_cpu_s").get<double>();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    double used = source.stats().at("loop_cpu_s").get<double>() - before;
    std::cout << rpc_poll_mode_name(mode) << ": " << used << " s of CPU in 0.3 s idle\n";
    if (mode == RpcPollMode::kSpin) {
      // A spinning loop takes every slice it is given; on a loaded host (the sanitizer suite at
      // -j2: 0.0097 s of CPU in 0.3 s once) that can take longer than 0.3 s to add up to 0.02 s.
      // A loop that blocks never gets there.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (used <= 0.02 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        used = source.stats().at("loop_cpu_s").get<double>() - before;
      }
      EXPECT_GT(used, 0.02) << "a spinning loop idle for up to 5 s used " << used << " s of CPU";
    } else
      EXPECT_LT(used, 0.02) << rpc_poll_mode_name(mode) << " loop idle for 0.3 s used " << used
                            << " s of CPU";
  }
}
