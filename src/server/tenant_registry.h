// TenantRegistry: the live tenant configuration of `hinge serve --tenants FILE` and what follows
// from it: each tenant's prefix-cache owner id (kv_ids.h; stable across reloads), its usage
// counters, its public prefixes' tokens, and the engine-side policy (TTL, cache share).
//
// Life: open() reads and applies the file; reload() (SIGHUP, POST /admin/reload) re-reads it
// and swaps the snapshot atomically, or refuses a bad file with its error and keeps the old
// one. Applying a configuration tells the engine (EngineThread::call, between steps):
//   - each tenant's policy (cache_ttl_s or the server default, cache_share);
//   - a tenant whose permission_version changed: entries of its other versions are dropped
//     (they already miss: the version is part of the namespace) and move to the front of the
//     eviction order; its running requests finish on their KV but publish no more;
//   - a tenant no longer in the file: every entry of it is dropped.
// Request threads take snapshot() (a shared_ptr to an immutable value) once per request.
//
// Thread-safety: every method is safe from any thread; reload/admin calls are serialized.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/engine_thread.h"
#include "kv/kv_tier.h"
#include "server/tenancy.h"

namespace hinge {
class Tokenizer;
}

namespace hinge::server {

// Counters of one tenant (GET /v1/usage, per-tenant metrics). Sizes and counts only.
struct TenantUsage {
  std::atomic<int64_t> requests{0};       // accepted
  std::atomic<int64_t> rejected{0};       // 4xx/5xx decided before generation
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> cached_tokens{0};  // of prompt_tokens, found in the prefix cache
  std::atomic<int64_t> completion_tokens{0};
};

// A public prefix as token ids (one per tokenization a prompt may use), full blocks only.
struct PublicPrefix {
  std::string id;
  kv::CacheNamespace ns;
  std::vector<std::vector<int32_t>> token_variants;
};

struct TenantSnapshot {
  TenantsConfig config;
  std::vector<int32_t> owners;                      // owner id of config.tenants[i]
  std::vector<std::shared_ptr<TenantUsage>> usage;  // of config.tenants[i]
  std::vector<PublicPrefix> public_prefixes;
};

class TenantRegistry {
 public:
  struct Options {
    std::string path;            // the tenants file
    CacheSecret secret{};        // namespaces' key
    double default_ttl_s = 0;    // --cache-ttl (0: no limit)
    int32_t block_size = 16;     // the engine's; public prefixes count in its full blocks
    // KV tiers (disk, Redis): a purged tenant's blocks there are deleted, and those of a
    // permission version replaced or a tenant removed (crypto-shredding). Outlive the registry.
    std::vector<kv::KvTierStore*> kv_tiers;
  };
  // Reads the file (errors: I/O, or the parser's "line N: field: ..."), applies it.
  static StatusOr<std::unique_ptr<TenantRegistry>> open(const Options& options,
                                                        const Tokenizer& tokenizer,
                                                        EngineThread& engine);

  // Reads and parses a tenants file (what open and reload do first; hinge serve checks the
  // file with it before loading the model).
  static StatusOr<TenantsConfig> read(const std::string& path);

  std::shared_ptr<const TenantSnapshot> snapshot() const;
  const CacheSecret& secret() const { return options_.secret; }

  // Re-reads the file. A bad file: its error, nothing changes. Returns the tenant count.
  StatusOr<int32_t> reload();
  // Sets a tenant's permission version now (until the next reload reads the file's); returns
  // the cache entries dropped. Unknown tenant: error.
  StatusOr<int32_t> set_permission_version(const std::string& id, int64_t version);
  // Drops every cached block of the tenant; returns how many.
  StatusOr<int32_t> purge(const std::string& id);

  // The scope (namespace, owner, epoch, public prefix) of a request of tenant index t.
  kv::CacheScope scope_for(const TenantSnapshot& s, size_t t, std::span<const int32_t> prompt,
                           const std::optional<std::string>& cache_salt,
                           const std::optional<std::string>& prompt_cache_key) const;

 private:
  // Deletes the KV tiers' blocks of (tenant, version): its keys are derived per block and
  // never stored, so nothing of it stays readable.
  void forget_tier_group(std::string_view tenant_id, int64_t permission_version);
  TenantRegistry(const Options& options, const Tokenizer& tokenizer, EngineThread& engine)
      : options_(options), tok_(tokenizer), engine_(engine) {}
  // Builds the snapshot of `config` and tells the engine; caller holds admin_mu_.
  Status apply(TenantsConfig config);

  const Options options_;
  const Tokenizer& tok_;
  EngineThread& engine_;
  std::mutex admin_mu_;  // serializes reload / admin changes
  mutable std::mutex snap_mu_;
  std::shared_ptr<const TenantSnapshot> snap_;  // guarded by snap_mu_
  std::map<std::string, int32_t> owner_ids_;    // guarded by admin_mu_; never reused
  std::map<std::string, std::shared_ptr<TenantUsage>> usage_;  // guarded by admin_mu_
  int32_t next_owner_ = 1;                      // guarded by admin_mu_
};

// The public-prefix blocks of `prompt`: the most full blocks it shares, token for token from
// its start, with a declared prefix's full blocks (0: none), and which prefix. Nothing past a
// declared prefix's last full block is ever public.
int32_t public_prefix_blocks(const std::vector<PublicPrefix>& prefixes,
                             std::span<const int32_t> prompt, int32_t block_size,
                             const PublicPrefix** which);

}  // namespace hinge::server
