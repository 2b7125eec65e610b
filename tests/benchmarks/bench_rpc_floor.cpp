// The RPC path's floor (issue 14): a Frontend server (common/wire/frontend.capnp) that answers
// every search at once with `--hits` fixed hits, on one kj event loop, with nothing behind it.
// `gpusearch load --connect` against it measures what Cap'n Proto RPC over loopback costs on this
// machine with the same client, request and reply shapes as the aggregator's front end: its
// added_ms is the floor of the aggregator's added_ms (launch/bench-frontend.sh runs both).
//
//   bench_rpc_floor [--listen 127.0.0.1:0] [--address-file F] [--hits 10]
//                   [--rpc-poll block|adaptive|spin] [--rpc-spin-us 5000] [--rpc-thread CPU,rt]
//
// Serves until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "common/metrics.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/frontend.capnp.h"
#include "common/wire/rpc_polling.hpp"

namespace fe = gpusearch::wire::frontend;

namespace {

class ImmediateFrontend final : public fe::Frontend::Server {
 public:
  ImmediateFrontend(unsigned hits, gpusearch::LoopPoller& poller) : hits_(hits), poller_(poller) {}
  kj::Promise<void> search(SearchContext context) override {
    poller_.note_activity();
    auto resp = context.getResults().initResponse();
    resp.setId(context.getParams().getRequest().getId());
    auto hits = resp.initHits(hits_);
    for (unsigned i = 0; i < hits_; ++i) {
      hits[i].setDocid(("doc-" + std::to_string(1000 + i)).c_str());
      hits[i].setScore(1.0 / (i + 1));
    }
    resp.setServerMicros(0);
    return kj::READY_NOW;
  }
  // The event loop's CPU time (this process has no other thread), as the aggregator reports it.
  kj::Promise<void> stats(StatsContext context) override {
    const std::string json = "{\"loop_cpu_s\": " + std::to_string(gpusearch::metrics::thread_cpu_seconds()) +
                             ", \"rpc_poll\": \"" +
                             gpusearch::rpc_poll_mode_name(poller_.polling().mode) + "\"}";
    context.getResults().setJson(json.c_str());
    return kj::READY_NOW;
  }

 private:
  unsigned hits_;
  gpusearch::LoopPoller& poller_;
};

struct Connection {
  Connection(kj::Own<kj::AsyncIoStream>&& s, unsigned hits, gpusearch::LoopPoller& poller)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(network, kj::heap<ImmediateFrontend>(hits, poller))) {}
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

struct IgnoreFailures : kj::TaskSet::ErrorHandler {
  void taskFailed(kj::Exception&&) override {}  // a client gone away
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cap'n Proto RPC floor: a Frontend server that answers at once"};
  std::string listen = "127.0.0.1:0", address_file;
  unsigned hits = 10, spin_us = 5000;
  std::string poll = "block";
  app.add_option("--listen", listen, "ADDR:PORT (or unix:PATH) to listen on");
  app.add_option("--address-file", address_file, "write the bound ADDR:PORT here");
  app.add_option("--hits", hits, "hits per answer")->check(CLI::Range(0u, 100000u));
  app.add_option("--rpc-poll", poll, "block, adaptive or spin (as the aggregator's)")
      ->capture_default_str();
  app.add_option("--rpc-spin-us", spin_us, "adaptive: the longest it polls")->capture_default_str();
  std::string thread;
  app.add_option("--rpc-thread", thread, "CPU, rt or CPU,rt (as the aggregator's)");
  CLI11_PARSE(app, argc, argv);
  gpusearch::RpcPolling polling;
  try {
    polling.mode = gpusearch::parse_rpc_poll_mode(poll);
    if (std::string why =
            gpusearch::place_this_thread(gpusearch::parse_thread_placement(thread, "--rpc-thread"));
        !why.empty())
      throw gpusearch::Error("--rpc-thread: " + why);
  } catch (const gpusearch::Error& e) {
    std::fprintf(stderr, "bench_rpc_floor: %s\n", e.what());
    return 2;
  }
  polling.spin = std::chrono::microseconds(spin_us);

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  auto io = kj::setupAsyncIo();
  auto listener =
      io.provider->getNetwork().parseAddress(listen.c_str()).wait(io.waitScope)->listen();
  const std::string bound = gpusearch::bound_address(listen, listener->getPort());
  if (!address_file.empty()) {
    std::ofstream(address_file + ".tmp") << bound << '\n';
    std::rename((address_file + ".tmp").c_str(), address_file.c_str());
  }
  std::printf("bench_rpc_floor: serving on %s\n", bound.c_str());
  std::fflush(stdout);

  gpusearch::LoopPoller poller(io.waitScope, polling);
  IgnoreFailures failures;
  kj::TaskSet connections(failures);
  std::function<kj::Promise<void>()> accept_loop = [&]() -> kj::Promise<void> {
    return listener->accept().then([&](kj::Own<kj::AsyncIoStream>&& stream) {
      auto c = kj::heap<Connection>(kj::mv(stream), hits, poller);
      auto done = c->network.onDisconnect();
      connections.add(done.attach(kj::mv(c)));
      return accept_loop();
    });
  };
  auto accepting = accept_loop();
  bool stop = false;
  auto stopping = io.unixEventPort.onSignal(SIGTERM)
                      .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                      .then([&](siginfo_t) {
                        stop = true;
                        poller.wake();
                      })
                      .eagerlyEvaluate(nullptr);
  poller.run_until([&] { return stop; }, [] { return false; });
  if (!address_file.empty()) std::remove(address_file.c_str());
  return 0;
}
