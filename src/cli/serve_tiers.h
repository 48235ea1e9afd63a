// The KV tiers of `hinge serve` (--kv-disk; kv/kv_tier.h): opened after the engine (their
// blocks are sealed under its KV format) and attached to it.
#pragma once

#include <memory>

#include "cli/commands.h"
#include "hinge/engine.h"
#include "kv/kv_tier.h"
#include "server/tenancy.h"

namespace hinge::cli {

// The tier the flags ask for, attached to `engine`; null when none. Errors say which flag.
StatusOr<std::unique_ptr<kv::KvTierStore>> open_kv_tiers(const ServeArgs& args, Engine& engine,
                                                         const server::CacheSecret& secret);

}  // namespace hinge::cli
