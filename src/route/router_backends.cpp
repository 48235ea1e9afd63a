// hinge route's learning side: /metrics polls (load, health), /v1/stats discovery (block size,
// the KV event endpoints) and the KV event subscriptions (SUB per replica, DEALER for replay).
#include <chrono>
#include <cstdio>
#include <thread>
#include <zmq.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "route/kv_event_decode.h"
#include "route/router_impl.h"

namespace hinge::route {

namespace {

// The value of the first sample of `name` (any labels) in a Prometheus text exposition.
std::optional<double> sample(const std::string& text, std::string_view name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    const size_t after = at + name.size();
    if (line_start && after < text.size() && (text[after] == '{' || text[after] == ' ')) {
      const size_t eol = std::min(text.find('\n', after), text.size());
      const size_t sp = text.rfind(' ', eol);
      if (sp != std::string::npos && sp > after) {
        try {
          return std::stod(text.substr(sp + 1, eol - sp - 1));
        } catch (...) {
          return std::nullopt;
        }
      }
    }
    at = after;
  }
  return std::nullopt;
}

// An endpoint a replica bound on a wildcard address, as reachable at the replica's host.
std::string reachable(const std::string& endpoint, const std::string& host) {
  for (const char* any : {"tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:"}) {
    const std::string a = any;
    if (endpoint.rfind(a, 0) == 0) {
      const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
      return "tcp://" + h + ":" + endpoint.substr(a.size());
    }
  }
  return endpoint;
}

uint64_t be64(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | p[i];
  return v;
}

void sleep_until(double t, const std::atomic<bool>& stop) {
  while (!stop && now_s() < t) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

void Router::Impl::poll_loop() {
  double next_discovery = 0;
  while (!stop_flag) {
    const double t0 = now_s();
    const bool discover = t0 >= next_discovery;
    for (const auto& bp : backends) {
      Backend& b = *bp;
      auto m = backend_fetch(b.addr, "GET", "/metrics", own_headers(), "", 1.0, 16u << 20);
      const bool ok = m.ok() && m->first == 200;
      std::optional<nlohmann::json> stats;
      bool need_stats = discover;
      {
        std::lock_guard lock(b.mu);
        need_stats |= b.events_endpoint.empty() || !b.healthy;
      }
      if (ok && need_stats) {
        auto s = backend_fetch(b.addr, "GET", "/v1/stats", own_headers(), "", 1.0, 16u << 20);
        if (s.ok() && s->first == 200) {
          auto j = nlohmann::json::parse(s->second, nullptr, false);
          if (j.is_object()) stats = std::move(j);
        }
      }
      std::lock_guard lock(b.mu);
      if (!ok) {
        if (b.healthy && !config.quiet)
          std::fprintf(stderr, "hinge route: %s is down (%s)\n", b.addr.url.c_str(),
                       m.ok() ? fmt::format("/metrics answered {}", m->first).c_str()
                              : m.status().message().c_str());
        b.healthy = false;
        b.events_live = false;
        b.prefix.clear();  // a restarted replica starts empty; its events say what it holds
        b.last_seq.reset();
        continue;
      }
      if (!b.healthy && !config.quiet)
        std::fprintf(stderr, "hinge route: %s is up\n", b.addr.url.c_str());
      b.healthy = true;
      b.waiting = sample(m->second, "hinge:num_requests_waiting").value_or(0);
      b.kv_usage = sample(m->second, "hinge:kv_cache_usage_perc").value_or(0);
      if (stats) {
        const nlohmann::json& j = *stats;
        if (j.contains("kv") && j["kv"].contains("block_size") && j["kv"]["block_size"].is_number_integer())
          b.block_size = j["kv"]["block_size"].get<int32_t>();
        std::string ep, rp;
        if (j.contains("kv_events") && j["kv_events"].is_object()) {
          const auto& e = j["kv_events"];
          if (e.contains("endpoint") && e["endpoint"].is_string())
            ep = reachable(e["endpoint"].get<std::string>(), b.addr.host);
          if (e.contains("replay") && e["replay"].is_string())
            rp = reachable(e["replay"].get<std::string>(), b.addr.host);
        }
        if (ep != b.events_endpoint || rp != b.replay_endpoint) {
          b.events_endpoint = ep;
          b.replay_endpoint = rp;
          b.prefix.clear();
          b.last_seq.reset();
          b.events_live = false;
        }
      }
    }
    if (discover) next_discovery = t0 + 2;
    sleep_until(t0 + config.poll_interval_s, stop_flag);
  }
}

namespace {

struct Subscription {
  std::string endpoint, replay;
  std::optional<zmq::socket_t> sub, dealer;
  double next_ping = 0;
};

}  // namespace

void Router::Impl::subscribe_loop() {
  zmq::context_t ctx(1);
  std::vector<Subscription> subs(backends.size());

  // Applies one batch (b.mu held). seq: its sequence number.
  auto apply = [&](Backend& b, uint64_t seq, const zmq::message_t& payload) {
    b.last_seq = seq;
    auto batch = decode_kv_event_batch(std::string_view(static_cast<const char*>(payload.data()), payload.size()));
    if (!batch.ok()) {
      ++b.bad_batches;
      return;
    }
    for (const DecodedKvEvent& e : batch->events) {
      switch (e.kind) {
        case DecodedKvEvent::Kind::kAllCleared:
          b.prefix.clear();
          break;
        case DecodedKvEvent::Kind::kRemoved:
          b.prefix.block_removed(e.hashes);
          break;
        case DecodedKvEvent::Kind::kStored:
          b.block_size = e.block_size;
          b.prefix.block_stored(e.hashes, e.parent, e.token_ids, e.block_size);
          break;
      }
    }
    ++b.events;
    b.last_event_at = now_s();
    b.events_live = true;
  };

  auto open_dealer = [&](Subscription& s) {
    s.dealer.reset();
    if (s.replay.empty()) return;
    s.dealer.emplace(ctx, zmq::socket_type::dealer);
    s.dealer->set(zmq::sockopt::linger, 0);
    s.dealer->connect(s.replay);
  };

  // Asks replica i's replay socket for every batch from `from` and applies them in order. No
  // answer within a second: its events are not live (the dealer is replaced: late replies go).
  auto replay = [&](size_t i, uint64_t from) {
    Subscription& s = subs[i];
    Backend& b = *backends[i];
    if (!s.dealer) return;
    unsigned char start[8];
    for (int k = 0; k < 8; ++k) start[k] = static_cast<unsigned char>(from >> (8 * (7 - k)));
    s.dealer->send(zmq::message_t(), zmq::send_flags::sndmore);
    s.dealer->send(zmq::message_t(start, 8), zmq::send_flags::dontwait);
    {
      std::lock_guard lock(b.mu);
      ++b.replays;
    }
    const double deadline = now_s() + 1.0;
    bool first = true;
    while (!stop_flag) {
      const double left = deadline - now_s();
      zmq::pollitem_t item{s.dealer->handle(), 0, ZMQ_POLLIN, 0};
      if (left <= 0 || zmq::poll(&item, 1, std::chrono::milliseconds(static_cast<int>(left * 1000) + 1)) == 0) {
        std::lock_guard lock(b.mu);
        b.events_live = false;
        open_dealer(s);
        return;
      }
      std::vector<zmq::message_t> frames;
      for (;;) {
        zmq::message_t f;
        if (!s.dealer->recv(f, zmq::recv_flags::dontwait)) break;
        frames.push_back(std::move(f));
        if (!s.dealer->get(zmq::sockopt::rcvmore)) break;
      }
      if (frames.size() < 2) continue;
      const zmq::message_t& seq_frame = frames[frames.size() - 2];
      const uint64_t seq = be64(seq_frame);
      std::lock_guard lock(b.mu);
      if (seq == ~uint64_t{0}) {  // the end
        b.events_live = true;
        return;
      }
      if (first && from == 0) b.prefix.clear();  // the whole history follows
      if (first && seq != from) ++b.gaps;           // the buffer no longer holds `from`
      first = false;
      if (!b.last_seq || seq > *b.last_seq) apply(b, seq, frames.back());
    }
  };

  while (!stop_flag) {
    // (Re)connect where discovery found (other) endpoints.
    for (size_t i = 0; i < backends.size(); ++i) {
      std::string ep, rp;
      {
        std::lock_guard lock(backends[i]->mu);
        ep = backends[i]->events_endpoint;
        rp = backends[i]->replay_endpoint;
      }
      Subscription& s = subs[i];
      if (ep == s.endpoint && rp == s.replay) continue;
      s = Subscription{};
      s.endpoint = ep;
      s.replay = rp;
      try {
        if (!ep.empty()) {
          s.sub.emplace(ctx, zmq::socket_type::sub);
          s.sub->set(zmq::sockopt::linger, 0);
          s.sub->set(zmq::sockopt::subscribe, "");
          s.sub->connect(ep);
        }
        open_dealer(s);
      } catch (const zmq::error_t& e) {
        if (!config.quiet)
          std::fprintf(stderr, "hinge route: %s: KV events at %s: %s\n",
                       backends[i]->addr.url.c_str(), ep.c_str(), e.what());
        s.sub.reset();
        s.dealer.reset();
      }
    }
    std::vector<zmq::pollitem_t> items;
    std::vector<size_t> which;
    for (size_t i = 0; i < subs.size(); ++i)
      if (subs[i].sub) {
        items.push_back({subs[i].sub->handle(), 0, ZMQ_POLLIN, 0});
        which.push_back(i);
      }
    if (items.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
    for (size_t k = 0; k < items.size(); ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      const size_t i = which[k];
      Backend& b = *backends[i];
      for (int n = 0; n < 1000; ++n) {  // what is queued, then the others get a turn
        std::vector<zmq::message_t> frames;
        for (;;) {
          zmq::message_t f;
          if (!subs[i].sub->recv(f, zmq::recv_flags::dontwait)) break;
          frames.push_back(std::move(f));
          if (!subs[i].sub->get(zmq::sockopt::rcvmore)) break;
        }
        if (frames.empty()) break;
        if (frames.size() != 3 || frames[1].size() != 8) {
          std::lock_guard lock(b.mu);
          ++b.bad_batches;
          continue;
        }
        const uint64_t seq = be64(frames[1]);
        std::optional<uint64_t> ask;  // replay from here instead of applying
        {
          std::lock_guard lock(b.mu);
          const bool has_replay = subs[i].dealer.has_value();
          if (!b.last_seq) {
            if (seq != 0 && has_replay) ask = 0;
            else apply(b, seq, frames[2]);
          } else if (seq == 0) {  // the replica restarted: a new stream
            b.prefix.clear();
            apply(b, seq, frames[2]);
          } else if (seq <= *b.last_seq) {
            // applied already (from replay)
          } else if (seq > *b.last_seq + 1) {
            ++b.gaps;
            if (has_replay) ask = *b.last_seq + 1;
            else apply(b, seq, frames[2]);
          } else {
            apply(b, seq, frames[2]);
          }
        }
        if (ask) replay(i, *ask);
      }
    }
    // Replay pings: liveness of each replica's events, and what SUB dropped.
    const double now = now_s();
    for (size_t i = 0; i < subs.size(); ++i) {
      if (!subs[i].dealer || now < subs[i].next_ping) continue;
      subs[i].next_ping = now + 2;
      std::optional<uint64_t> last;
      {
        std::lock_guard lock(backends[i]->mu);
        last = backends[i]->last_seq;
      }
      replay(i, last ? *last + 1 : 0);
    }
  }
}

}  // namespace hinge::route
