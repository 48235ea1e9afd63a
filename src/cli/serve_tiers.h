// The KV tiers of `hinge serve` (--kv-disk, --kv-redis; kv/kv_tier.h): opened after the engine
// (their blocks are sealed under its KV format) and attached to it. With both, the disk is asked
// before Redis and every block goes to both (tier/tier_stack.h).
#pragma once

#include <memory>
#include <vector>

#include "cli/commands.h"
#include "hinge/engine.h"
#include "kv/kv_tier.h"
#include "server/tenancy.h"

namespace hinge::cli {

struct ServeTiers {
  std::vector<std::unique_ptr<kv::KvTierStore>> owned;  // must outlive the engine
  std::vector<kv::KvTierStore*> tiers;                  // each tier (metrics, purges)
};

// The tiers the flags ask for, attached to `engine`; none when no flag. Errors say which flag.
StatusOr<ServeTiers> open_kv_tiers(const ServeArgs& args, Engine& engine,
                                   const server::CacheSecret& secret);

}  // namespace hinge::cli
