// ReplyShedder: memory pressure and temperature for one person's commands (`hinge run`,
// `hinge chat`), with the same watch and levels as `hinge serve` (pressure_watch.h,
// pressure_level.h) but acting on the one reply in flight instead of on admission:
//
//   memory    KV usable                         the reply in flight
//   normal    all                               as asked
//   elevated  max(half, what the capped reply   capped at max_tokens (--pressure-max-tokens)
//             still needs)
//   critical  what the reply holds              finished now, short, with a one-line notice
//
// Temperature (its own level) ends nothing: it lowers the step token budget (the prefill
// chunk) as pressure_policy.h does for serve.
//
// Entering elevated or critical evicts the prefix cache's unused blocks and returns every free
// page (Engine::shrink_kv_cache); back to normal the limit is lifted. A reply started while
// critical computes its prompt and one token. Nothing is killed: the command goes on, and the
// next reply once the level is normal again has its full length.
//
// Thread-safety: the watch reads on its own thread; every other method is the caller's (the
// thread that steps the engine), between steps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hinge/engine.h"
#include "pressure/pressure_level.h"
#include "pressure/pressure_watch.h"

namespace hinge {

struct ReplyShedderConfig {
  bool enabled = true;           // false: --no-pressure (the level stays normal)
  pressure::PressureWatchConfig watch;
  int32_t max_tokens = 256;      // elevated's cap on a reply (0: none)
};

class ReplyShedder {
 public:
  ReplyShedder(Engine* engine, const ReplyShedderConfig& config);
  ~ReplyShedder();

  // Between steps: takes the watch's level and applies a change to the engine (prints the
  // transition on stderr). Returns the level now.
  pressure::PressureLevel poll();
  pressure::PressureLevel level() const { return level_; }
  pressure::PressureLevel thermal() const { return thermal_; }
  const std::string& reasons() const { return reasons_; }
  // The most tokens a reply may have at this level (elevated: max_tokens; critical: 1;
  // 0: no cap), given what it asked for.
  int32_t reply_cap(int32_t asked) const;
  // Between steps, for the reply in flight (prompt_tokens of prompt, generated so far, asked
  // for max_new): true when the level ends it now. Also keeps the KV limit at what it needs.
  bool should_end(int64_t prompt_tokens, int64_t generated, int32_t max_new);
  int64_t transitions() const { return transitions_; }
  int64_t replies_shed() const { return replies_shed_; }
  void count_shed() { ++replies_shed_; }

 private:
  void apply(int32_t need_blocks);

  Engine* engine_;
  ReplyShedderConfig config_;
  std::unique_ptr<pressure::PressureWatch> watch_;
  pressure::PressureLevel level_ = pressure::PressureLevel::kNormal;
  pressure::PressureLevel thermal_ = pressure::PressureLevel::kNormal;
  std::string reasons_;
  int64_t transitions_ = 0;
  int64_t replies_shed_ = 0;
};

}  // namespace hinge
