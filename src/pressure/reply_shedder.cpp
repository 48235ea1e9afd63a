#include "pressure/reply_shedder.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/units.h"
#include "pressure/pressure_policy.h"
#include "sched/kv_demand.h"

namespace hinge {

using pressure::PressureLevel;

ReplyShedder::ReplyShedder(Engine* engine, const ReplyShedderConfig& config)
    : engine_(engine), config_(config) {
  if (config_.enabled) watch_ = std::make_unique<pressure::PressureWatch>(config_.watch, nullptr);
}

ReplyShedder::~ReplyShedder() {
  if (watch_) watch_->stop();
}

PressureLevel ReplyShedder::poll() {
  if (!watch_) return level_;
  const pressure::PressureSnapshot s = watch_->snapshot();
  if (s.thermal != thermal_) {
    thermal_ = s.thermal;
    // The serve policy's heat actions (pressure_policy.h), for one sequence: the step tokens.
    const int32_t tokens = engine_->config().max_batched_tokens;
    const EngineStats st = engine_->stats();
    const int32_t step = pressure_actions(PressureLevel::kNormal, PressurePolicyConfig{}, 1, tokens,
                                          st.kv_blocks_total, st.kv_blocks_used, 0, thermal_)
                             .max_batched_tokens;
    engine_->set_step_limits(0, step);
    std::fprintf(stderr, "hinge: temperature %s: step tokens %d\n",
                 pressure::pressure_level_name(thermal_), step > 0 ? step : tokens);
  }
  if (s.level == level_) return level_;
  const PressureLevel was = level_;
  level_ = s.level;
  reasons_ = s.reasons;
  ++transitions_;
  int64_t fell = 0;
  if (level_ == PressureLevel::kNormal) {
    engine_->set_kv_block_limit(INT32_MAX);
  } else if (was == PressureLevel::kNormal || level_ > was) {
    fell = engine_->shrink_kv_cache();
    apply(0);
  }
  const EngineStats st = engine_->stats();
  std::fprintf(stderr, "hinge: memory pressure %s%s%s%s: KV usable %d of %d blocks%s\n",
               pressure::pressure_level_name(level_), reasons_.empty() ? "" : " (",
               reasons_.c_str(), reasons_.empty() ? "" : ")", st.kv_blocks_limit,
               st.kv_blocks_total,
               level_ == PressureLevel::kNormal ? ""
               : level_ == PressureLevel::kElevated
                   ? fmt::format(", replies capped at {} tokens; RSS fell by {}", config_.max_tokens,
                                 format_bytes(static_cast<uint64_t>(fell))).c_str()
                   : fmt::format(", the reply in flight ends now; RSS fell by {}",
                                 format_bytes(static_cast<uint64_t>(fell))).c_str());
  return level_;
}

int32_t ReplyShedder::reply_cap(int32_t asked) const {
  switch (level_) {
    case PressureLevel::kNormal: return asked;
    case PressureLevel::kElevated:
      return config_.max_tokens > 0 ? std::min(asked, config_.max_tokens) : asked;
    case PressureLevel::kCritical: return 1;
  }
  return asked;
}

bool ReplyShedder::should_end(int64_t prompt_tokens, int64_t generated, int32_t max_new) {
  if (level_ == PressureLevel::kNormal) return false;
  const int32_t cap = reply_cap(max_new);
  if (generated >= cap) return true;
  const kv::KvSpec& spec = engine_->kv_spec();
  apply(static_cast<int32_t>(sched::worst_case_kv_blocks(
      prompt_tokens, cap, 1, spec.block_size_tokens, spec.num_groups())));
  return false;
}

void ReplyShedder::apply(int32_t need_blocks) {
  const EngineStats s = engine_->stats();
  const int32_t floor = level_ == PressureLevel::kElevated ? s.kv_blocks_total / 2 : 0;
  engine_->set_kv_block_limit(std::max({floor, need_blocks, s.kv_blocks_used}));
}

}  // namespace hinge
