#include "aggregator/rpc_front_end.hpp"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include <capnp/rpc-twoparty.h>
#include <fmt/format.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>

#include "aggregator/result_cache.hpp"
#include "common/error.hpp"
#include "common/metrics.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/frontend.capnp.h"
#include "common/wire/rpc_polling.hpp"
#include "common/wire/wire.hpp"

namespace gpusearch {

std::atomic<bool> g_stop_requested{false};

namespace {

namespace fe = wire::frontend;
using Clock = AggregatorClock;

kj::Exception error_of(kj::Exception::Type type, const std::string& message) {
  return kj::Exception(type, __FILE__, __LINE__, kj::heapString(message.c_str()));
}

// An answer as the client gets it.
struct RpcAnswer {
  CachedAnswer answer;
  bool partial = false;
  bool deadline_exceeded = false;
  std::uint64_t server_us = 0;
};

std::uint64_t micros_since(Clock::time_point t) {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

std::string random_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", rd());
  return t;
}

}  // namespace

// Threads: the kj thread runs the event loop (every connection and the requests' promises); the
// MPI thread polls `queue` and may reject a request; the merge thread answers. Everything a
// request's reply needs is touched on the kj thread only; the others reach it through post(),
// whose tasks the kj thread runs in a batch per wake-up.
struct RpcQuerySource::Impl final : kj::TaskSet::ErrorHandler {
  FrontEndOptions options;
  SearchParams defaults;
  std::function<void()> on_request;
  std::string token;

  // Shared with the MPI thread and post()ers.
  mutable std::mutex mutex;
  std::deque<ArrivedQuery> queue;           // requests for the MPI thread
  std::atomic<std::size_t> queued{0};       // queue.size(): the MPI thread polls it unlocked
  std::deque<std::function<void()>> tasks;  // posted for the kj thread
  // The kj thread's doorbell: an eventfd written (outside every lock) by the first post() after
  // the kj thread found no task. Not a kj cross-thread fulfiller: its fulfil() wakes the loop
  // while holding kj's own lock, and a loop thread of higher priority on the poster's CPU
  // (--rpc-thread CPU,rt) then preempts the poster only to block on that lock (and on ours):
  // four extra context switches per answer, measured.
  kj::AutoCloseFd doorbell_fd;
  bool doorbell_armed = false;  // under `mutex`: the kj thread waits for the doorbell
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> received{0}, answered{0}, failed{0}, overloaded{0}, connections{0},
      shutdown_refused{0}, deadline_exceeded{0}, answered_after_deadline{0};
  std::atomic<std::size_t> in_flight{0}, max_in_flight{0};

  // The kj thread's own.
  std::unordered_map<std::uint64_t, kj::Own<kj::PromiseFulfiller<RpcAnswer>>> waiting;
  std::uint64_t next_ticket = 1;
  kj::Timer* timer = nullptr;
  LoopPoller* poller = nullptr;  // how the loop waits (options.polling)
  bool stop_loop = false;
  std::thread thread;
  std::atomic<unsigned long> loop_thread_handle{0};  // while it runs: its CPU time for stats
  std::atomic<double> loop_cpu_at_end{0};

  ~Impl() noexcept(false) { stop_and_join(); }

  bool stop_seen() const { return stopping || g_stop_requested; }
  bool on_loop_thread() const { return std::this_thread::get_id() == thread.get_id(); }

  void taskFailed(kj::Exception&& e) override {
    // A connection's failure (a client that went away mid-call, a malformed message) ends that
    // connection only.
    if (e.getType() != kj::Exception::Type::DISCONNECTED)
      fmt::print(stderr, "gpusearch-aggregator: front end: {}\n", e.getDescription().cStr());
  }

  // Runs `task` on the kj thread, after the tasks posted before it; from any thread. Rings the
  // kj thread's doorbell, after unlocking, when it waits for tasks.
  void post(std::function<void()> task) {
    bool ring = false;
    {
      std::lock_guard lock(mutex);
      tasks.push_back(std::move(task));
      std::swap(ring, doorbell_armed);
    }
    if (ring) {
      const std::uint64_t one = 1;  // the counter cannot overflow: it is drained on each ring
      [[maybe_unused]] auto n = ::write(doorbell_fd.get(), &one, sizeof one);
    }
  }

  // Runs the posted tasks, then waits for more (kj thread). `bell` observes doorbell_fd.
  kj::Promise<void> run_tasks(kj::UnixEventPort::FdObserver& bell) {
    std::deque<std::function<void()>> ready;
    {
      std::lock_guard lock(mutex);
      ready.swap(tasks);
      if (ready.empty()) {
        doorbell_armed = true;
        // kj's epoll is edge-triggered: the eventfd is drained on every ring, so each ring after
        // this point is a new edge (and the observer is registered before the loop polls again).
        return bell.whenBecomesReadable().then([this, &bell] {
          std::uint64_t count;
          [[maybe_unused]] auto n = ::read(doorbell_fd.get(), &count, sizeof count);
          return run_tasks(bell);
        });
      }
    }
    for (auto& task : ready) {
      try {
        task();
      } catch (const std::exception& e) {  // a task's failure must not stop the others
        fmt::print(stderr, "gpusearch-aggregator: front end: {}\n", e.what());
      }
    }
    if (poller) poller->note_activity();
    // Later: what the tasks fulfilled (replies) goes out first.
    return kj::evalLater([this, &bell] { return run_tasks(bell); });
  }

  // The kj thread's CPU time; under the mutex, which run() holds when the thread ends.
  double loop_cpu_seconds() const {
    std::lock_guard lock(mutex);
    return loop_thread_handle ? metrics::thread_cpu_seconds(loop_thread_handle)
                              : loop_cpu_at_end.load();
  }

  nlohmann::json stats_json() const {
    return {{"listen", options.listen},
            {"connections", connections.load()},
            {"requests", received.load()},
            {"answered", answered.load()},
            {"failed", failed.load()},
            {"overloaded", overloaded.load()},
            {"deadline_exceeded", deadline_exceeded.load()},
            {"answered_after_deadline", answered_after_deadline.load()},
            {"shutdown_refused", shutdown_refused.load()},
            {"in_flight", in_flight.load()},
            {"max_in_flight", max_in_flight.load()},
            {"rpc_poll", rpc_poll_mode_name(options.polling.mode)},
            {"loop_cpu_s", loop_cpu_seconds()},
            {"limits",
             {{"max_requests", options.max_requests},
              {"max_per_client", options.max_per_client},
              {"traversal_limit_words", options.traversal_limit_words},
              {"nesting_limit", options.nesting_limit}}}};
  }

  // Queues a request for the MPI thread (kj thread); its id (the server's rpc-N when the client
  // gave none) goes to `id`. A request counts against max_requests until the cluster answers
  // it, even when its deadline answered the client first: the bound is on the cluster's work.
  kj::Promise<RpcAnswer> submit(ArrivedQuery q, std::string& id) {
    if (waiting.size() >= options.max_requests) {
      ++overloaded;
      return error_of(kj::Exception::Type::OVERLOADED,
                      fmt::format("overloaded: {} requests in flight on the aggregator (limit "
                                  "{}, --max-requests); retry later",
                                  waiting.size(), options.max_requests));
    }
    auto paf = kj::newPromiseAndFulfiller<RpcAnswer>();
    q.ticket = next_ticket++;
    if (q.text.id.empty()) q.text.id = fmt::format("rpc-{}", q.ticket);
    id = q.text.id;
    waiting.emplace(q.ticket, kj::mv(paf.fulfiller));
    in_flight = waiting.size();
    max_in_flight = std::max(max_in_flight.load(), waiting.size());
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(q));
      queued = queue.size();
    }
    ++received;
    on_request();
    return kj::mv(paf.promise);
  }

  // The request's fulfiller, gone from `waiting` (kj thread); null when already answered.
  kj::Own<kj::PromiseFulfiller<RpcAnswer>> take(std::uint64_t ticket) {
    auto it = waiting.find(ticket);
    if (it == waiting.end()) return {};
    auto f = kj::mv(it->second);
    waiting.erase(it);
    in_flight = waiting.size();
    return f;
  }

  void deliver(std::uint64_t ticket, RpcAnswer&& a) {
    auto f = take(ticket);
    if (!f) return;
    if (!f->isWaiting()) {  // the client has its reply (the deadline's) or has gone
      ++answered_after_deadline;
      return;
    }
    ++answered;
    f->fulfill(kj::mv(a));
  }

  void fail(std::uint64_t ticket, const std::string& why) {
    auto f = take(ticket);
    if (!f) return;
    ++failed;
    if (f->isWaiting()) f->reject(error_of(kj::Exception::Type::FAILED, why));
  }

  // Ends the event loop once the requests still waiting have failed (they would hang their
  // clients otherwise), and joins the kj thread.
  void stop_and_join() {
    if (!thread.joinable()) return;
    post([this] {
      for (auto& [ticket, f] : waiting)
        if (f->isWaiting())
          f->reject(error_of(kj::Exception::Type::DISCONNECTED, "the aggregator stopped"));
      waiting.clear();
      in_flight = 0;
      stop_loop = true;
      if (poller) poller->wake();
    });
    thread.join();
  }

  void run(std::promise<std::string>& started);
};

namespace {

// One per connection: its own count of requests in flight.
class FrontendServer final : public fe::Frontend::Server {
 public:
  explicit FrontendServer(RpcQuerySource::Impl& impl) : impl_(impl) {}

  kj::Promise<void> search(SearchContext context) override {
    const auto r = context.getParams().getRequest();
    const FrontEndOptions& o = impl_.options;
    impl_.poller->note_activity();
    if (impl_.stop_seen())
      return error_of(kj::Exception::Type::DISCONNECTED,
                      "the aggregator is shutting down; request refused");
    if (*in_flight_ >= o.max_per_client) {
      ++impl_.overloaded;
      return error_of(kj::Exception::Type::OVERLOADED,
                      fmt::format("overloaded: this client has {} requests in flight (limit {}, "
                                  "--max-per-client); wait for answers before sending more",
                                  *in_flight_, o.max_per_client));
    }
    ArrivedQuery q;
    q.arrival = Clock::now();
    q.text.id = std::string(r.getId().cStr(), r.getId().size());
    if (r.hasText() && r.getText().size() > 0) {
      q.text.text = std::string(r.getText().cStr(), r.getText().size());
    } else {
      for (auto t : r.getTerms()) {
        if (!q.text.text.empty()) q.text.text += ' ';
        q.text.text += t.cStr();
        if (q.text.text.size() > o.max_text_bytes) break;
      }
    }
    auto fail = [&](const std::string& why) {
      ++impl_.failed;
      return kj::Promise<void>(error_of(kj::Exception::Type::FAILED, why));
    };
    if (q.text.text.size() > o.max_text_bytes)
      return fail(fmt::format("query text over {} bytes", o.max_text_bytes));
    if (!q.text.id.empty())
      if (std::string why = query_id_problem(q.text.id); !why.empty())
        return fail("bad query id " + escape_query_id(q.text.id) + ": " + why);
    gpusearch::SearchParams p = impl_.defaults;
    if (r.getHasMode()) {
      switch (r.getMode()) {
        case wire::schema::Mode::MODE_AND: p.mode = Mode::kAnd; break;
        case wire::schema::Mode::MODE_OR: p.mode = Mode::kOr; break;
        case wire::schema::Mode::MODE_AND_OR: p.mode = Mode::kAndOr; break;
        default: return fail("unknown mode");
      }
    }
    if (r.getHasScoring()) {
      switch (r.getScoring()) {
        case wire::schema::Scoring::BM25: p.scoring = Scoring::kBm25; break;
        case wire::schema::Scoring::BM25_PR: p.scoring = Scoring::kBm25Pr; break;
        default: return fail("unknown scoring");
      }
    }
    if (r.getK() != 0) {
      if (r.getK() > wire::kMaxK) return fail(fmt::format("k {} over the limit of {}", r.getK(), wire::kMaxK));
      p.k = r.getK();
    }
    if (r.hasRanker() && r.getRanker().size() > 0) {
      if (!o.second_stage)
        return fail("this cluster has no second stage (started without --ranker-store): a "
                    "request cannot name a ranker");
      q.text.ranker = std::string(r.getRanker().cStr(), r.getRanker().size());
      if (q.text.ranker.size() > 256 || q.text.ranker.find_first_of(" \t\r\n/") != std::string::npos)
        return fail("bad ranker name (at most 256 bytes, no whitespace or '/')");
    }
    q.params = p;
    if (r.getDeadlineMs() != 0) q.deadline = q.arrival + std::chrono::milliseconds(r.getDeadlineMs());
    const auto arrival = q.arrival;
    ++*in_flight_;
    auto counter = in_flight_;
    std::string id;
    auto answer = impl_.submit(std::move(q), id);
    if (r.getDeadlineMs() != 0) {
      // Enforced: at the deadline the client gets an answer whatever the cluster does.
      auto at_deadline =
          impl_.timer->afterDelay(r.getDeadlineMs() * kj::MILLISECONDS).then([this, arrival] {
            ++impl_.deadline_exceeded;
            RpcAnswer a;
            a.partial = true;
            a.deadline_exceeded = true;
            a.server_us = micros_since(arrival);
            return a;
          });
      answer = answer.exclusiveJoin(kj::mv(at_deadline));
    }
    return answer
        .then([context, id = std::move(id)](RpcAnswer a) mutable {
          auto resp = context.getResults().initResponse();
          resp.setId(id.c_str());
          auto hits = resp.initHits(unsigned(a.answer.hits.size()));
          for (unsigned i = 0; i < hits.size(); ++i) {
            hits[i].setDocid(a.answer.hits[i].docid.c_str());
            hits[i].setScore(a.answer.hits[i].score);
          }
          resp.setPartial(a.partial);
          resp.setAnsweredByOr(a.answer.answered_by_or);
          resp.setServerMicros(a.server_us);
          resp.setDeadlineExceeded(a.deadline_exceeded);
        })
        .attach(kj::defer([counter] { --*counter; }));
  }

  kj::Promise<void> stats(StatsContext context) override {
    context.getResults().setJson(impl_.stats_json().dump());
    return kj::READY_NOW;
  }

  kj::Promise<void> shutdown(ShutdownContext context) override {
    const auto given = context.getParams().getToken();
    if (impl_.token.empty() || std::string(given.cStr(), given.size()) != impl_.token) {
      ++impl_.shutdown_refused;
      return error_of(kj::Exception::Type::FAILED,
                      "shutdown refused: the operator token does not match (it is in the "
                      "aggregator's --operator-token-file)");
    }
    impl_.stopping = true;
    impl_.on_request();
    return kj::READY_NOW;
  }

 private:
  RpcQuerySource::Impl& impl_;
  std::shared_ptr<std::size_t> in_flight_ = std::make_shared<std::size_t>(0);
};

// A connection: the socket, its two-party network (reading under the limits), its RPC system.
struct Connection {
  Connection(RpcQuerySource::Impl& impl, kj::Own<kj::AsyncIoStream>&& s, capnp::ReaderOptions ro)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, ro),
        rpc(capnp::makeRpcServer(network, kj::heap<FrontendServer>(impl))) {}
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

}  // namespace

void RpcQuerySource::Impl::run(std::promise<std::string>& started) {
  if (options.loop_thread.any())
    if (std::string why = place_this_thread(options.loop_thread); !why.empty()) {
      started.set_exception(std::make_exception_ptr(Error("--rpc-thread: " + why)));
      return;
    }
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Own<kj::ConnectionReceiver> listener;
  std::string bound;
  try {
    const auto colon = options.listen.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throw Error("--listen " + options.listen +
                  ": expected ADDR:PORT (e.g. 127.0.0.1:7300) or unix:PATH");
    auto addr = io.provider->getNetwork().parseAddress(options.listen.c_str()).wait(io.waitScope);
    listener = addr->listen();
    bound = gpusearch::bound_address(options.listen, listener->getPort());
  } catch (const kj::Exception& e) {
    started.set_exception(std::make_exception_ptr(
        Error(fmt::format("cannot listen on {}: {}", options.listen, e.getDescription().cStr()))));
    return;
  } catch (...) {
    started.set_exception(std::current_exception());
    return;
  }
  loop_thread_handle = static_cast<unsigned long>(pthread_self());
  LoopPoller loop_poller(io.waitScope, options.polling);
  poller = &loop_poller;
  timer = &io.provider->getTimer();
  kj::UnixEventPort::FdObserver bell(io.unixEventPort, doorbell_fd.get(),
                                     kj::UnixEventPort::FdObserver::OBSERVE_READ);
  auto running_tasks =
      run_tasks(bell).eagerlyEvaluate([this](kj::Exception&& e) { taskFailed(kj::mv(e)); });
  started.set_value(bound);

  capnp::ReaderOptions ro;
  ro.traversalLimitInWords = options.traversal_limit_words;
  ro.nestingLimit = int(options.nesting_limit);
  kj::TaskSet connection_tasks(*this);
  std::function<kj::Promise<void>()> accept_loop = [&]() -> kj::Promise<void> {
    return listener->accept().then([&](kj::Own<kj::AsyncIoStream>&& stream) {
      ++connections;
      auto c = kj::heap<Connection>(*this, kj::mv(stream), ro);
      auto done = c->network.onDisconnect();
      connection_tasks.add(done.attach(kj::mv(c)));
      return accept_loop();
    });
  };
  auto accepting = accept_loop().eagerlyEvaluate([this](kj::Exception&& e) { taskFailed(kj::mv(e)); });
  // Until stop_and_join()'s task; polls or sleeps between events as --rpc-poll says.
  loop_poller.run_until([this] { return stop_loop; }, [this] { return !waiting.empty(); });
  // Replies fulfilled just before the stop still have to be written: a moment for the loop.
  io.provider->getTimer().afterDelay(200 * kj::MILLISECONDS).wait(io.waitScope);
  std::lock_guard lock(mutex);
  doorbell_armed = false;  // no task runs any more
  timer = nullptr;
  poller = nullptr;
  loop_cpu_at_end = metrics::thread_cpu_seconds();
  loop_thread_handle = 0;
}

RpcQuerySource::RpcQuerySource(FrontEndOptions options, SearchParams defaults,
                               std::function<void()> on_request)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->defaults = defaults;
  impl_->on_request = std::move(on_request);
  impl_->doorbell_fd = kj::AutoCloseFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (impl_->doorbell_fd.get() < 0)
    throw Error(fmt::format("front end: cannot create an eventfd: {}", std::strerror(errno)));
  if (!impl_->options.token_file.empty()) {
    impl_->token = random_token();
    const std::string path = impl_->options.token_file.string();
    {
      std::ofstream f(path, std::ios::trunc);
      if (!f) throw InputError(path, 0, "cannot write the operator token file");
    }
    ::chmod(path.c_str(), S_IRUSR | S_IWUSR);  // before the token goes in
    std::ofstream f(path, std::ios::trunc);
    f << impl_->token << '\n';
    if (!f) throw InputError(path, 0, "cannot write the operator token file");
  }
  std::promise<std::string> started;
  auto bound = started.get_future();
  impl_->thread = std::thread([this, &started] { impl_->run(started); });
  try {
    bound_ = bound.get();
  } catch (...) {
    impl_->thread.join();
    throw;
  }
  if (!impl_->options.address_file.empty()) {
    const std::string path = impl_->options.address_file.string();
    {
      std::ofstream f(path + ".tmp");
      f << bound_ << '\n';
      if (!f) throw InputError(path, 0, "cannot write the address file");
    }
    std::filesystem::rename(path + ".tmp", path);  // whole or absent for a waiting script
  }
  const ThreadPlacement& placed = impl_->options.loop_thread;
  std::string thread;
  if (placed.any())
    thread =
        fmt::format(", --rpc-thread {}{}{}", placed.cpu >= 0 ? std::to_string(placed.cpu) : "",
                    placed.cpu >= 0 && placed.realtime ? "," : "", placed.realtime ? "rt" : "");
  fmt::print(stderr,
             "gpusearch-aggregator: serving RPC on {} (max {} requests, {} per client, "
             "--rpc-poll {}{})\n",
             bound_, impl_->options.max_requests, impl_->options.max_per_client,
             rpc_poll_mode_name(impl_->options.polling.mode), thread);
}

RpcQuerySource::~RpcQuerySource() {
  // Whatever is still waiting (a run ended by an error) fails rather than hangs its client.
  impl_->stop_and_join();
  if (!impl_->options.token_file.empty()) std::filesystem::remove(impl_->options.token_file);
  if (!impl_->options.address_file.empty()) {
    std::error_code ec;
    std::filesystem::remove(impl_->options.address_file, ec);
  }
}

void RpcQuerySource::poll(Clock::time_point, Clock::time_point, std::size_t,
                          std::vector<ArrivedQuery>& out) {
  if (impl_->queued == 0) return;  // the common case, without the kj thread's lock
  std::lock_guard lock(impl_->mutex);
  while (!impl_->queue.empty()) {
    out.push_back(std::move(impl_->queue.front()));
    impl_->queue.pop_front();
  }
  impl_->queued = 0;
}

bool RpcQuerySource::exhausted() const {
  if (!impl_->stop_seen()) return false;
  std::lock_guard lock(impl_->mutex);
  return impl_->queue.empty();
}

void RpcQuerySource::request_stop() {
  impl_->stopping = true;
  impl_->on_request();
}

void RpcQuerySource::answered(std::uint64_t ticket, const CachedAnswer& answer, bool partial,
                              Clock::time_point arrival) {
  RpcAnswer a;
  a.answer = answer;
  a.partial = partial;
  a.server_us = micros_since(arrival);
  if (impl_->on_loop_thread()) {
    impl_->deliver(ticket, std::move(a));
    return;
  }
  impl_->post([impl = impl_.get(), ticket, a = std::move(a)]() mutable {
    impl->deliver(ticket, std::move(a));
  });
}

void RpcQuerySource::rejected(std::uint64_t ticket, const QueryProblem& problem) {
  impl_->post([impl = impl_.get(), ticket, why = problem.what] { impl->fail(ticket, why); });
}

nlohmann::json RpcQuerySource::stats() const { return impl_->stats_json(); }

}  // namespace gpusearch
