#include "engine/kv_tiering.h"

#include <chrono>
#include <cstring>

namespace hinge {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t written_tag(const kv::TierBlockKey& k) {
  return k.hash.lo ^ (k.hash.hi * 0x9e3779b97f4a7c15ULL) ^ k.ns.words[0] ^ k.ns.words[1];
}

}  // namespace

KvTiering::KvTiering(kv::KvCacheManager* kv, kv::KvArena* arena, KvTransfer* transfer,
                     kv::KvTierStore* store, int64_t max_queued_bytes)
    : kv_(kv), arena_(arena), transfer_(transfer), store_(store), max_queued_bytes_(max_queued_bytes) {
  worker_ = std::thread([this] { run(); });
}

KvTiering::~KvTiering() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  done_cv_.notify_all();
  worker_.join();
}

kv::TierBlockKey KvTiering::key_of(const kv::CacheScope& scope, size_t i,
                                   const kv::BlockHash& h) const {
  const bool shared = i < static_cast<size_t>(scope.public_blocks);
  return kv::TierBlockKey{.ns = scope.ns_of_block(i),
                          .hash = h,
                          .group = shared ? 0 : scope.tier_group,
                          .root_ns = scope.ns_of_block(0),
                          .root = hashes_[0]};
}

bool KvTiering::start_fetch(kv::RequestId id, std::span<const int32_t> prompt,
                            const kv::CacheScope& scope) {
  if (!kv_->prefix_cache_enabled() || prompt.size() < 2) return false;
  const size_t bs = static_cast<size_t>(kv_->block_size_tokens());
  const size_t n_full = (prompt.size() - 1) / bs;  // a hit leaves one token to compute
  if (n_full == 0) return false;
  hashes_.clear();
  kv_->extend_block_hashes(prompt.first(n_full * bs), scope, &hashes_);
  const kv::ComputedBlocks hit = kv_->get_computed_blocks(prompt, scope, hashes_);
  const size_t have = static_cast<size_t>(hit.num_hit_blocks());
  if (have >= n_full || !store_->may_contain(key_of(scope, have, hashes_[have]))) return false;
  Fetch f;
  f.id = id;
  f.tokens.assign(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(n_full * bs));
  f.scope = scope;
  f.first = static_cast<int32_t>(have);
  for (size_t i = have; i < n_full; ++i) f.keys.push_back(key_of(scope, i, hashes_[i]));
  f.started = now_s();
  {
    std::lock_guard lock(mu_);
    fetches_.push_back(std::move(f));
    ++stats_.fetches;
  }
  ++pending_;
  cv_.notify_one();
  return true;
}

void KvTiering::poll(std::vector<kv::RequestId>* ready) {
  if (pending_ == 0) return;
  std::deque<Fetch> done;
  {
    std::lock_guard lock(mu_);
    done.swap(fetched_);
  }
  const int64_t bs = kv_->block_size_tokens();
  const double t = now_s();
  int64_t restored = 0;
  double waited = 0;
  for (Fetch& f : done) {
    --pending_;
    if (f.num_read > 0) {
      const auto tokens = std::span<const int32_t>(f.tokens).first(
          static_cast<size_t>((int64_t{f.first} + f.num_read) * bs));
      auto held = transfer_->import_prefix(tokens, f.scope, f.bytes, f.first);
      if (held.ok() && *held > f.first) restored += *held - f.first;
    }
    waited += t - f.started;
    ready->push_back(f.id);
  }
  std::lock_guard lock(mu_);
  stats_.restored_blocks += restored;
  stats_.fetch_wait_seconds += waited;
}

void KvTiering::wait(double max_s) {
  std::unique_lock lock(mu_);
  done_cv_.wait_for(lock, std::chrono::duration<double>(max_s),
                    [&] { return !fetched_.empty() || stop_; });
}

void KvTiering::write_back(std::span<const int32_t> tokens, const kv::CacheScope& scope) {
  if (!kv_->prefix_cache_enabled()) return;
  const size_t bs = static_cast<size_t>(kv_->block_size_tokens());
  const size_t n_full = tokens.size() / bs;
  if (n_full == 0) return;
  hashes_.clear();
  kv_->extend_block_hashes(tokens.first(n_full * bs), scope, &hashes_);
  probe_.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(n_full * bs));
  probe_.push_back(0);  // a lookup leaves one token: one more lets every full block count
  const kv::ComputedBlocks hit = kv_->get_computed_blocks(probe_, scope, hashes_);
  const int32_t n = hit.num_hit_blocks();
  const int32_t groups = kv_->num_groups();
  const int64_t bpb = arena_->bytes_per_block();
  if (written_.size() > (size_t{1} << 20)) written_.clear();  // bounded; the store dedups too
  const double now = now_s();
  for (int32_t i = 0; i < n; ++i) {
    const kv::TierBlockKey key = key_of(scope, static_cast<size_t>(i), hashes_[static_cast<size_t>(i)]);
    const uint64_t tag = written_tag(key);
    if (const auto it = written_.find(tag); it != written_.end() && now - it->second < kRewriteAfterS)
      continue;
    Write w{key, std::vector<uint8_t>(static_cast<size_t>(bpb * groups)),
            kv_->owner_ttl(scope.owner_of_block(static_cast<size_t>(i)))};
    for (int32_t g = 0; g < groups; ++g) {
      const kv::BlockId b = hit.blocks[static_cast<size_t>(g * n + i)];
      std::memcpy(w.bytes.data() + g * bpb, arena_->base() + int64_t{b.value} * bpb,
                  static_cast<size_t>(bpb));
    }
    {
      std::lock_guard lock(mu_);
      if (stats_.queued_bytes + bpb * groups > max_queued_bytes_) {
        ++stats_.dropped_writes;
        continue;
      }
      stats_.queued_bytes += bpb * groups;
      writes_.push_back(std::move(w));
    }
    written_[tag] = now;
    cv_.notify_one();
  }
}

void KvTiering::flush() {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return (writes_.empty() && !writing_) || stop_; });
}

KvTieringStats KvTiering::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KvTiering::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !fetches_.empty() || !writes_.empty(); });
    if (stop_) return;
    if (!fetches_.empty()) {  // reads first: a request waits for them
      Fetch f = std::move(fetches_.front());
      fetches_.pop_front();
      lock.unlock();
      std::vector<uint8_t> block;
      for (const kv::TierBlockKey& key : f.keys) {
        auto hit = store_->get(key, &block);
        if (!hit.ok() || !*hit) break;
        f.bytes.insert(f.bytes.end(), block.begin(), block.end());
        ++f.num_read;
      }
      lock.lock();
      fetched_.push_back(std::move(f));
      done_cv_.notify_all();
      continue;
    }
    Write w = std::move(writes_.front());
    writes_.pop_front();
    writing_ = true;
    lock.unlock();
    const Status st = store_->put(w.key, w.bytes, w.ttl_s);
    lock.lock();
    writing_ = false;
    stats_.queued_bytes -= static_cast<int64_t>(w.bytes.size());
    if (st.ok()) ++stats_.written_blocks;
    if (writes_.empty()) done_cv_.notify_all();
  }
}

}  // namespace hinge
