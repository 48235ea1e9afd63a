#include "tier/redis_tier.h"

#include <hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace hinge::tier {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

timeval to_timeval(double s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

bool parse_int(std::string_view s, int lo, int hi, int* out) {
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct Reply {
  redisReply* r = nullptr;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

}  // namespace

StatusOr<RedisUrl> RedisUrl::parse(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  auto bad = [&](const char* why) {
    return Status::Errorf("--kv-redis: {} (give redis://HOST:PORT[/DB], e.g. "
                          "redis://127.0.0.1:6379/0)",
                          why);
  };
  if (url.rfind(kScheme, 0) != 0) return bad("not a redis:// URL");
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  RedisUrl u;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string_view::npos) return bad("credentials are [USER]:PASSWORD@");
    u.user = std::string(cred.substr(0, colon));
    u.password = std::string(cred.substr(colon + 1));
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &u.db)) return bad("the database is a number");
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:PORT
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed [");
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("bad port");
      port = rest.substr(close + 2);
      if (port.empty()) return bad("bad port");
    }
    rest = rest.substr(1, close - 1);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    port = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (port.empty()) return bad("bad port");
  }
  if (!port.empty() && !parse_int(port, 1, 65535, &u.port)) return bad("bad port");
  if (rest.empty()) return bad("no host");
  u.host = std::string(rest);
  return u;
}

std::string RedisUrl::display() const {
  return fmt::format("{}:{}/{}", host, port, db);
}

RedisTier::RedisTier(const RedisTierOptions& options, std::shared_ptr<const BlockSealer> sealer)
    : options_(options), sealer_(std::move(sealer)) {
  c_.entries = -1;
  c_.bytes = -1;
  c_.capacity_bytes = 0;
  c_.up = 0;
}

RedisTier::~RedisTier() {
  if (ctx_) redisFree(ctx_);
}

StatusOr<std::unique_ptr<RedisTier>> RedisTier::open(const RedisTierOptions& options,
                                                     std::shared_ptr<const BlockSealer> sealer) {
  if (options.url.host.empty()) return Status::Error("--kv-redis: no host");
  if (!(options.timeout_s > 0) || options.timeout_s > 60)
    return Status::Error("--kv-redis-timeout: give 0 < seconds <= 60");
  if (!(options.default_ttl_s >= 0)) return Status::Error("--kv-redis-ttl: give seconds >= 0");
  std::unique_ptr<RedisTier> t(new RedisTier(options, std::move(sealer)));
  std::lock_guard lock(t->mu_);
  t->connect_locked();  // down now is a warning: requests are served from RAM meanwhile
  return t;
}

bool RedisTier::connect_locked() {
  if (ctx_) return true;
  const double now = now_s();
  if (now < retry_at_) return false;
  ctx_ = redisConnectWithTimeout(options_.url.host.c_str(), options_.url.port,
                                 to_timeval(options_.timeout_s));
  if (!ctx_ || ctx_->err) {
    mark_down_locked(ctx_ ? ctx_->errstr : "cannot allocate a connection");
    return false;
  }
  redisSetTimeout(ctx_, to_timeval(options_.timeout_s));
  redisEnableKeepAlive(ctx_);
  auto command = [&](std::initializer_list<std::string_view> args) -> std::string {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r{static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()),
                                                      argv.data(), lens.data()))};
    if (!r.r) return ctx_->errstr;
    if (r.r->type == REDIS_REPLY_ERROR) return std::string(r.r->str, r.r->len);
    return "";
  };
  std::string err;
  if (!options_.url.password.empty()) {
    err = options_.url.user.empty() ? command({"AUTH", options_.url.password})
                                    : command({"AUTH", options_.url.user, options_.url.password});
    if (!err.empty()) err = "AUTH: " + err;
  }
  if (err.empty() && options_.url.db != 0) {
    const std::string db = std::to_string(options_.url.db);
    err = command({"SELECT", db});
    if (!err.empty()) err = "SELECT " + db + ": " + err;
  }
  if (!err.empty()) {
    mark_down_locked(err);
    return false;
  }
  if (!c_.up)
    std::fprintf(stderr, "hinge: KV Redis tier %s: connected\n", options_.url.display().c_str());
  c_.up = 1;
  backoff_s_ = 0;
  return true;
}

void RedisTier::mark_down_locked(const std::string& why) {
  if (ctx_) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  backoff_s_ = backoff_s_ == 0 ? 0.5 : std::min(backoff_s_ * 2, 8.0);
  retry_at_ = now_s() + backoff_s_;
  if (c_.up || backoff_s_ == 0.5)
    std::fprintf(stderr,
                 "hinge: warning: KV Redis tier %s unavailable (%s): serving from RAM, "
                 "reconnecting with backoff\n",
                 options_.url.display().c_str(), why.c_str());
  c_.up = 0;
}

std::string RedisTier::key_of(const kv::TierBlockKey& key) const {
  return fmt::format("{}:{}:{{{}}}:{}", options_.key_prefix, sealer_->group_tag(key.group),
                     sealer_->chain_tag(key), sealer_->name(key));
}

bool RedisTier::up() const {
  std::lock_guard lock(mu_);
  return c_.up != 0;
}

Status RedisTier::put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) {
  const double ttl = ttl_s > 0 ? ttl_s : options_.default_ttl_s;
  std::vector<uint8_t> blob;
  sealer_->seal(key, bytes, &blob, BlockSealer::expiry_after(ttl));
  const std::string k = key_of(key);
  const std::string ex = std::to_string(static_cast<int64_t>(std::ceil(ttl)));
  std::lock_guard lock(mu_);
  if (!connect_locked()) {
    ++c_.put_errors;
    return Status::Error("Redis unavailable");
  }
  // One command: the blob and its expiry land together or not at all.
  const char* argv[5] = {"SET", k.data(), reinterpret_cast<const char*>(blob.data()), "EX", ex.data()};
  const size_t lens[5] = {3, k.size(), blob.size(), 2, ex.size()};
  Reply r{static_cast<redisReply*>(redisCommandArgv(ctx_, ttl > 0 ? 5 : 3, argv, lens))};
  if (!r.r) {
    ++c_.put_errors;
    const std::string why = ctx_->errstr;
    mark_down_locked(why);
    return Status::Errorf("Redis: {}", why);
  }
  if (r.r->type == REDIS_REPLY_ERROR) {  // e.g. OOM under maxmemory noeviction: not down
    ++c_.put_errors;
    return Status::Errorf("Redis: {}", std::string(r.r->str, r.r->len));
  }
  ++c_.puts;
  return Status::Ok();
}

StatusOr<bool> RedisTier::get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) {
  const std::string k = key_of(key);
  std::vector<uint8_t> blob;
  {
    std::lock_guard lock(mu_);
    if (!connect_locked()) {
      ++c_.get_errors;
      return Status::Error("Redis unavailable");
    }
    const char* argv[2] = {"GET", k.data()};
    const size_t lens[2] = {3, k.size()};
    Reply r{static_cast<redisReply*>(redisCommandArgv(ctx_, 2, argv, lens))};
    if (!r.r) {
      ++c_.get_errors;
      const std::string why = ctx_->errstr;
      mark_down_locked(why);
      return Status::Errorf("Redis: {}", why);
    }
    if (r.r->type == REDIS_REPLY_NIL) {
      ++c_.misses;
      return false;
    }
    if (r.r->type != REDIS_REPLY_STRING) {
      ++c_.get_errors;
      return Status::Error("Redis: unexpected reply to GET");
    }
    blob.assign(reinterpret_cast<const uint8_t*>(r.r->str),
                reinterpret_cast<const uint8_t*>(r.r->str) + r.r->len);
  }
  int64_t expires_at = 0;
  const Status opened = sealer_->open(key, blob, out, &expires_at);
  const bool expired = opened.ok() && BlockSealer::expired(expires_at);
  std::lock_guard lock(mu_);
  if (opened.ok() && !expired) {
    ++c_.hits;
    return true;
  }
  // Refused (tampered, truncated, foreign) or past its tenant's TTL: a miss, and the key goes.
  ++c_.misses;
  if (expired)
    ++c_.evictions;
  else
    ++c_.rejected;
  out->clear();
  if (ctx_) {
    const char* argv[2] = {"UNLINK", k.data()};
    const size_t lens[2] = {6, k.size()};
    Reply r{static_cast<redisReply*>(redisCommandArgv(ctx_, 2, argv, lens))};
    if (!r.r) mark_down_locked(ctx_->errstr);
  }
  return false;
}

int64_t RedisTier::forget_group(uint64_t group) {
  const std::string match = fmt::format("{}:{}:*", options_.key_prefix, sealer_->group_tag(group));
  std::lock_guard lock(mu_);
  int64_t deleted = 0;
  std::string cursor = "0";
  do {
    if (!connect_locked()) break;  // a purge while Redis is down: the TTL still bounds the keys
    const char* argv[6] = {"SCAN", cursor.data(), "MATCH", match.data(), "COUNT", "1000"};
    const size_t lens[6] = {4, cursor.size(), 5, match.size(), 5, 4};
    Reply r{static_cast<redisReply*>(redisCommandArgv(ctx_, 6, argv, lens))};
    if (!r.r) {
      mark_down_locked(ctx_->errstr);
      break;
    }
    if (r.r->type != REDIS_REPLY_ARRAY || r.r->elements != 2 ||
        r.r->element[0]->type != REDIS_REPLY_STRING || r.r->element[1]->type != REDIS_REPLY_ARRAY)
      break;
    cursor.assign(r.r->element[0]->str, r.r->element[0]->len);
    const redisReply* keys = r.r->element[1];
    if (keys->elements == 0) continue;
    std::vector<const char*> argv2{"UNLINK"};
    std::vector<size_t> lens2{6};
    for (size_t i = 0; i < keys->elements; ++i) {
      if (keys->element[i]->type != REDIS_REPLY_STRING) continue;
      argv2.push_back(keys->element[i]->str);
      lens2.push_back(keys->element[i]->len);
    }
    Reply d{static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv2.size()), argv2.data(), lens2.data()))};
    if (!d.r) {
      mark_down_locked(ctx_->errstr);
      break;
    }
    if (d.r->type == REDIS_REPLY_INTEGER) deleted += d.r->integer;
  } while (cursor != "0");
  c_.purged += deleted;
  return deleted;
}

kv::KvTierCounters RedisTier::counters() const {
  std::lock_guard lock(mu_);
  return c_;
}

}  // namespace hinge::tier
