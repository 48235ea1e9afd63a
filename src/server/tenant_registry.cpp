#include "server/tenant_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace hinge::server {

StatusOr<TenantsConfig> TenantRegistry::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("cannot read the tenants file {}", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Errorf("error reading the tenants file {}", path);
  auto c = parse_tenants(ss.str());
  if (!c.ok()) return c.status().with_context(path);
  return c;
}

StatusOr<std::unique_ptr<TenantRegistry>> TenantRegistry::open(const Options& options,
                                                               const Tokenizer& tokenizer,
                                                               EngineThread& engine) {
  auto config = read(options.path);
  if (!config.ok()) return config.status();
  std::unique_ptr<TenantRegistry> r(new TenantRegistry(options, tokenizer, engine));
  std::lock_guard lock(r->admin_mu_);
  HINGE_RETURN_IF_ERROR(r->apply(std::move(config).value()));
  return r;
}

std::shared_ptr<const TenantSnapshot> TenantRegistry::snapshot() const {
  std::lock_guard lock(snap_mu_);
  return snap_;
}

Status TenantRegistry::apply(TenantsConfig config) {
  const std::shared_ptr<const TenantSnapshot> old = snapshot();
  // Owner ids are never reused (a removed tenant's owner stays retired): refuse a file that
  // would need more than the pool can number, before anything changes.
  int64_t fresh_ids = 0;
  for (const TenantConfig& t : config.tenants) fresh_ids += owner_ids_.contains(t.id) ? 0 : 1;
  if (next_owner_ + fresh_ids > kv::kMaxCacheOwners - 1)
    return Status::Errorf("{} new tenant ids would pass the {} this server can number over its "
                          "life; restart the server to start the numbering again",
                          fresh_ids, kv::kMaxCacheOwners - 1);
  auto snap = std::make_shared<TenantSnapshot>();
  for (const TenantConfig& t : config.tenants) {
    auto [it, fresh] = owner_ids_.try_emplace(t.id, next_owner_);
    if (fresh) ++next_owner_;
    snap->owners.push_back(it->second);
    auto& u = usage_[t.id];
    if (!u) u = std::make_shared<TenantUsage>();
    snap->usage.push_back(u);
  }
  const size_t bs = static_cast<size_t>(std::max(1, options_.block_size));
  for (const PublicPrefixConfig& p : config.public_prefixes) {
    PublicPrefix pp;
    pp.id = p.id;
    pp.ns = public_prefix_namespace(options_.secret, p.id);
    // The tokenizations a prompt starting with this text may have: completions (BOS, text
    // kept as text), chat templates (special tokens parsed; with or without BOS added).
    for (auto [bos, special] : {std::pair{true, false}, {true, true}, {false, true}}) {
      std::vector<int32_t> ids = tok_.encode(p.text, bos, special);
      ids.resize(ids.size() / bs * bs);
      if (!ids.empty() && std::find(pp.token_variants.begin(), pp.token_variants.end(), ids) ==
                              pp.token_variants.end())
        pp.token_variants.push_back(std::move(ids));
    }
    snap->public_prefixes.push_back(std::move(pp));
  }
  snap->config = std::move(config);
  {
    std::lock_guard lock(snap_mu_);
    snap_ = snap;
  }
  // The engine side, after the swap (requests from now on use the new versions), in one call
  // between two steps: each tenant's policy and current epoch (entries and later-starting
  // requests of another version never publish), and removed tenants retired for good (their
  // id gets a fresh owner if it ever comes back, so nothing purged can hit again).
  struct Policy {
    int32_t owner;
    double ttl_s;
    double share;
    uint64_t epoch;
  };
  std::vector<Policy> policies;
  for (size_t i = 0; i < snap->config.tenants.size(); ++i) {
    const TenantConfig& t = snap->config.tenants[i];
    policies.push_back({snap->owners[i], t.cache_ttl_s.value_or(options_.default_ttl_s),
                        t.cache_share, static_cast<uint64_t>(t.permission_version)});
  }
  std::vector<int32_t> removed;
  if (old)
    for (size_t i = 0; i < old->config.tenants.size(); ++i) {
      const TenantConfig& was = old->config.tenants[i];
      const TenantConfig* now = snap->config.find(was.id);
      // Its tier blocks go with a removed tenant or a replaced permission version.
      if (now == nullptr || now->permission_version != was.permission_version)
        forget_tier_group(was.id, was.permission_version);
      if (now == nullptr) {
        removed.push_back(old->owners[i]);
        owner_ids_.erase(was.id);
      }
    }
  engine_.call([&policies, &removed](Engine& e) {
    for (const Policy& p : policies) {
      e.set_cache_owner_policy(p.owner, p.share, p.ttl_s);
      e.retire_cache_epochs(p.owner, p.epoch);
    }
    for (int32_t owner : removed) e.retire_cache_owner(owner);
    return 0;
  });
  return Status::Ok();
}

StatusOr<int32_t> TenantRegistry::reload() {
  std::lock_guard lock(admin_mu_);  // read under the lock too: the newest file is applied last
  auto config = read(options_.path);
  if (!config.ok()) return config.status();
  const auto n = static_cast<int32_t>(config->tenants.size());
  HINGE_RETURN_IF_ERROR(apply(std::move(config).value()));
  return n;
}

StatusOr<int32_t> TenantRegistry::set_permission_version(const std::string& id, int64_t version) {
  if (version < 0) return Status::Error("permission_version must be >= 0");
  std::lock_guard lock(admin_mu_);
  const std::shared_ptr<const TenantSnapshot> old = snapshot();
  const TenantConfig* t = old->config.find(id);
  if (t == nullptr) return Status::Errorf("no tenant `{}`", id.substr(0, 64));
  auto snap = std::make_shared<TenantSnapshot>(*old);
  int32_t owner = 0;
  for (size_t i = 0; i < snap->config.tenants.size(); ++i)
    if (snap->config.tenants[i].id == id) {
      if (snap->config.tenants[i].permission_version != version)
        forget_tier_group(id, snap->config.tenants[i].permission_version);
      snap->config.tenants[i].permission_version = version;
      owner = snap->owners[i];
    }
  {
    std::lock_guard l(snap_mu_);
    snap_ = snap;
  }
  const auto v = static_cast<uint64_t>(version);
  return engine_.call([owner, v](Engine& e) { return e.retire_cache_epochs(owner, v); });
}

StatusOr<int32_t> TenantRegistry::purge(const std::string& id) {
  std::lock_guard lock(admin_mu_);
  const std::shared_ptr<const TenantSnapshot> s = snapshot();
  for (size_t i = 0; i < s->config.tenants.size(); ++i)
    if (s->config.tenants[i].id == id) {
      const int32_t owner = s->owners[i];
      forget_tier_group(id, s->config.tenants[i].permission_version);
      return engine_.call([owner](Engine& e) { return e.purge_cache_owner(owner); });
    }
  return Status::Errorf("no tenant `{}`", id.substr(0, 64));
}

int32_t public_prefix_blocks(const std::vector<PublicPrefix>& prefixes,
                             std::span<const int32_t> prompt, int32_t block_size,
                             const PublicPrefix** which) {
  int32_t best = 0;
  *which = nullptr;
  for (const PublicPrefix& p : prefixes)
    for (const auto& ids : p.token_variants) {
      // The full blocks the prompt shares with the prefix's tokens (the text that follows the
      // prefix may tokenize across its last tokens: those blocks are simply not shared).
      const size_t n = std::min(ids.size(), prompt.size());
      const size_t common = static_cast<size_t>(
          std::mismatch(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), prompt.begin()).first -
          ids.begin());
      const auto blocks = static_cast<int32_t>(common / static_cast<size_t>(block_size));
      if (blocks > best) {
        best = blocks;
        *which = &p;
      }
    }
  return best;
}

void TenantRegistry::forget_tier_group(std::string_view tenant_id, int64_t permission_version) {
  const uint64_t g = tier_group(options_.secret, tenant_id, permission_version);
  for (kv::KvTierStore* t : options_.kv_tiers) t->forget_group(g);
}

kv::CacheScope TenantRegistry::scope_for(const TenantSnapshot& s, size_t t,
                                         std::span<const int32_t> prompt,
                                         const std::optional<std::string>& cache_salt,
                                         const std::optional<std::string>& prompt_cache_key) const {
  const TenantConfig& tc = s.config.tenants[t];
  kv::CacheScope scope(derive_namespace(options_.secret, tc.id, tc.permission_version, cache_salt,
                                        prompt_cache_key),
                       s.owners[t]);
  scope.epoch = static_cast<uint64_t>(tc.permission_version);
  scope.tier_group = tier_group(options_.secret, tc.id, tc.permission_version);
  const PublicPrefix* p = nullptr;
  scope.public_blocks = public_prefix_blocks(s.public_prefixes, prompt, options_.block_size, &p);
  if (p != nullptr) scope.public_ns = p->ns;
  return scope;
}

}  // namespace hinge::server
