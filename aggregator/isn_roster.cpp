#include "aggregator/isn_roster.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/wire/mpi_transport.hpp"

namespace gpusearch {

using Clock = AggregatorClock;
using namespace wire;

IsnRoster::IsnRoster(MPI_Comm world, std::size_t num_isns, ProgressPacer& pacer, std::string me)
    : world_(world), pacer_(pacer), me_(std::move(me)), books_(num_isns) {}

void IsnRoster::await_hellos(std::uint64_t timeout_ms, std::string& setup_error) {
  const std::size_t num_isns = books_.size();
  std::size_t got = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got < num_isns && Clock::now() < until) {
    auto m = try_receive(world_, MPI_ANY_SOURCE, kTagControl);
    if (!m) {
      pacer_.idle(Clock::now(), until, false);
      continue;
    }
    const std::size_t i = std::size_t(m->source - 1);
    if (!m->rejected.empty() || i >= num_isns) continue;
    const Control c = decode_control(m->data());
    if (c.kind != Control::Kind::kHello) continue;
    books_[i].hello = nlohmann::json::parse(c.payload, nullptr, false);
    ++got;
  }
  if (got < num_isns && setup_error.empty())
    setup_error = fmt::format("only {} of {} ISNs started within {} ms", got, num_isns, timeout_ms);
  for (std::size_t i = 0; i < num_isns; ++i)
    if (books_[i].hello.is_object() && books_[i].hello.contains("error")) {
      // Every ISN finds a shard-count mismatch too; report it once.
      const std::string e = books_[i].hello.at("error").get<std::string>();
      const bool mismatch_again = e.find("shard(s) but the job has") != std::string::npos &&
                                  setup_error.find("shard(s) but the job has") != std::string::npos;
      if (!mismatch_again)
        setup_error += (setup_error.empty() ? "" : "; ") + fmt::format("ISN rank {}: {}", i + 1, e);
    }
}

void IsnRoster::print_hellos(std::ostream& err) const {
  for (std::size_t i = 0; i < books_.size(); ++i) {
    const auto& h = books_[i].hello;
    err << fmt::format(
        "{}: ISN rank {} on {}: shard {}, {} docs, input positions {}..{}, "
        "{:.1f} MiB mapped, RSS {:.1f} MiB, engine {}, GPU ordinal {}\n",
        me_, i + 1, h.value("host", "?"), h.value("shard", 0u), h.value("docs", 0u),
        h.at("input_range")[0].get<std::uint32_t>(), h.at("input_range")[1].get<std::uint32_t>(),
        h.value("mapped_bytes", 0.0) / 1048576.0, h.value("rss_bytes", 0.0) / 1048576.0,
        h.value("engine", "?"), h.value("gpu_device", -1));
  }
}

void IsnRoster::sync_clocks() {
  for (std::size_t i = 0; i < books_.size(); ++i) {
    IsnBook& book = books_[i];
    for (std::uint64_t ping = 0; ping < 8; ++ping) {
      const auto t0 = Clock::now();
      send_blocking(encode_message(Control{Control::Kind::kClockPing, "", ping}), int(i + 1),
                    kTagControl, world_);
      std::optional<Received> m;
      const auto give_up = t0 + std::chrono::seconds(2);
      while (!(m = try_receive(world_, int(i + 1), kTagControl)) && Clock::now() < give_up)
        std::this_thread::yield();  // a few microseconds, and the round trip is what we measure
      const auto t2 = Clock::now();
      if (!m || !m->rejected.empty()) break;
      const Control c = decode_control(m->data());
      if (c.kind != Control::Kind::kClockPong) continue;
      const double rtt = std::chrono::duration<double, std::micro>(t2 - t0).count();
      if (book.clock_rtt_us >= 0 && rtt >= book.clock_rtt_us) continue;
      const double mid_us =
          std::chrono::duration<double, std::micro>((t0 + (t2 - t0) / 2).time_since_epoch())
              .count();
      book.clock_offset_us = std::int64_t(double(c.value) - mid_us);
      book.clock_rtt_us = rtt;
    }
  }
}

bool IsnRoster::all_share_vocabulary(const std::string& fingerprint) const {
  return std::all_of(books_.begin(), books_.end(), [&](const IsnBook& b) {
    return b.hello.value("vocabulary", "") == fingerprint;
  });
}

std::vector<int> IsnRoster::shut_down(std::uint64_t grace_ms) {
  const std::size_t num_isns = books_.size();
  std::vector<PendingSend> sends;
  auto msg = std::make_shared<const OutgoingMessage>(
      encode_message(Control{Control::Kind::kShutdown, ""}));
  std::vector<bool> waiting(num_isns, false);
  for (std::size_t i = 0; i < num_isns; ++i) {
    // A rank declared dead gets one too: if it is only slow, its answer clears it.
    if (books_[i].hello.is_null() || books_[i].hello.contains("error")) continue;
    sends.emplace_back(msg, int(i + 1), kTagControl, world_);
    waiting[i] = true;
  }
  const auto until = Clock::now() + std::chrono::milliseconds(grace_ms);
  std::size_t left = std::size_t(std::count(waiting.begin(), waiting.end(), true));
  while (left > 0 && Clock::now() < until) {
    bool all_sent = true;
    for (auto& s : sends) all_sent = s.test() && all_sent;
    bool any = false;
    while (auto m = try_receive(world_)) {
      any = true;
      const std::size_t i = std::size_t(m->source - 1);
      if (m->tag == kTagResultBatch && i < num_isns) {
        ++books_[i].late_results;  // a batch already answered without it
      } else if (m->tag == kTagControl && m->rejected.empty()) {
        try {
          const Control c = decode_control(m->data());
          if (c.kind == Control::Kind::kStatsReply && i < num_isns && waiting[i]) {
            books_[i].stats = nlohmann::json::parse(c.payload, nullptr, false);
            books_[i].dead = false;  // it was slow, not dead
            waiting[i] = false;
            --left;
          }
        } catch (const WireError& e) {
          std::cerr << me_ << ": " << e.what() << '\n';
        }
      }
    }
    const auto now = Clock::now();
    any ? pacer_.activity(now) : pacer_.idle(now, until, !all_sent);
  }
  std::vector<int> stuck;
  for (std::size_t i = 0; i < num_isns; ++i)
    if (waiting[i]) stuck.push_back(int(i + 1));
  return stuck;
}

nlohmann::json IsnRoster::to_json(double run_seconds, const std::vector<int>& stuck) const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < books_.size(); ++i) {
    const IsnBook& b = books_[i];
    const double compute = b.compute_us / 1e6;
    out.push_back(
        {{"rank", i + 1},
         {"hello", b.hello},
         {"stats", b.stats},
         {"batches_answered", b.batches_answered},
         {"batches_missed", b.batches_missed},
         {"late_results_discarded", b.late_results.load()},
         {"errors", b.errors.load()},
         {"compute_seconds", compute},
         {"idle_seconds", b.idle_us / 1e6},
         {"busy_fraction", run_seconds > 0 ? compute / run_seconds : 0.0},
         {"fallback_seen", b.fallback_seen},
         {"dead", b.dead.load()},
         {"declared_dead_after_batch", b.dead_after_batch},
         {"stuck_at_shutdown", std::find(stuck.begin(), stuck.end(), int(i + 1)) != stuck.end()}});
  }
  return out;
}

nlohmann::json IsnRoster::clocks_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < books_.size(); ++i)
    out.push_back({{"rank", i + 1},
                   {"offset_us", books_[i].clock_offset_us},
                   {"rtt_us", books_[i].clock_rtt_us}});
  return out;
}

std::size_t IsnRoster::live() const {
  return std::size_t(std::count_if(books_.begin(), books_.end(),
                                   [](const IsnBook& b) { return !b.dead; }));
}

std::vector<int> IsnRoster::dead_ranks() const {
  std::vector<int> out;
  for (std::size_t i = 0; i < books_.size(); ++i)
    if (books_[i].dead) out.push_back(int(i + 1));
  return out;
}

std::uint64_t IsnRoster::late_results() const {
  std::uint64_t n = 0;
  for (const IsnBook& b : books_) n += b.late_results;
  return n;
}

}  // namespace gpusearch
