// /metrics of the KV tiers (kv/kv_tier.h): each store's counters labelled tier="disk" /
// "redis", and the engine's side (reads waited for, blocks restored, writes dropped).
#pragma once

#include <span>
#include <string>

#include "hinge/engine.h"
#include "kv/kv_tier.h"

namespace hinge::server {

std::string render_tier_metrics(std::span<kv::KvTierStore* const> tiers, const EngineStats& e,
                                 const std::string& labels);

}  // namespace hinge::server
