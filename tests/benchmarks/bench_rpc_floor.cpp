// The RPC path's floor (issue 14): a Frontend server (common/wire/frontend.capnp) that answers
// every search at once with `--hits` fixed hits, on one kj event loop, with nothing behind it.
// `gpusearch load --connect` against it measures what Cap'n Proto RPC over loopback costs on this
// machine with the same client, request and reply shapes as the aggregator's front end: its
// added_ms is the floor of the aggregator's added_ms (launch/bench-frontend.sh runs both).
//
//   bench_rpc_floor [--listen 127.0.0.1:0] [--address-file F] [--hits 10]
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

#include "common/wire/frontend.capnp.h"

namespace fe = gpusearch::wire::frontend;

namespace {

class ImmediateFrontend final : public fe::Frontend::Server {
 public:
  explicit ImmediateFrontend(unsigned hits) : hits_(hits) {}
  kj::Promise<void> search(SearchContext context) override {
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

 private:
  unsigned hits_;
};

struct Connection {
  Connection(kj::Own<kj::AsyncIoStream>&& s, unsigned hits)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(network, kj::heap<ImmediateFrontend>(hits))) {}
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
  unsigned hits = 10;
  app.add_option("--listen", listen, "ADDR:PORT to listen on");
  app.add_option("--address-file", address_file, "write the bound ADDR:PORT here");
  app.add_option("--hits", hits, "hits per answer")->check(CLI::Range(0u, 100000u));
  CLI11_PARSE(app, argc, argv);

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  auto io = kj::setupAsyncIo();
  auto listener =
      io.provider->getNetwork().parseAddress(listen.c_str()).wait(io.waitScope)->listen();
  const std::string bound =
      listen.substr(0, listen.rfind(':')) + ":" + std::to_string(listener->getPort());
  if (!address_file.empty()) {
    std::ofstream(address_file + ".tmp") << bound << '\n';
    std::rename((address_file + ".tmp").c_str(), address_file.c_str());
  }
  std::printf("bench_rpc_floor: serving on %s\n", bound.c_str());
  std::fflush(stdout);

  IgnoreFailures failures;
  kj::TaskSet connections(failures);
  std::function<kj::Promise<void>()> accept_loop = [&]() -> kj::Promise<void> {
    return listener->accept().then([&](kj::Own<kj::AsyncIoStream>&& stream) {
      auto c = kj::heap<Connection>(kj::mv(stream), hits);
      auto done = c->network.onDisconnect();
      connections.add(done.attach(kj::mv(c)));
      return accept_loop();
    });
  };
  auto accepting = accept_loop();
  io.unixEventPort.onSignal(SIGTERM)
      .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
      .wait(io.waitScope);
  if (!address_file.empty()) std::remove(address_file.c_str());
  return 0;
}
