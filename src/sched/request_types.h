// The request vocabulary shared with the public Engine API (include/hinge/engine.h): priority
// classes and why a request finished. No scheduler internals.
#pragma once

#include <cstdint>

namespace hinge::sched {

// Lower value = scheduled first, preempted last.
enum class Priority : uint8_t { kInteractive = 0, kBatch = 1 };

enum class FinishReason : uint8_t {
  kNone,     // not finished
  kLength,   // max_new_tokens reached
  kStop,     // the caller saw EOS or a stop sequence (Scheduler::finish_request)
  kAborted,  // Scheduler::abort_request (client gone, cancelled)
  kError,    // the step that scheduled it failed (Scheduler::abort_step); nothing more follows
};

const char* finish_reason_name(FinishReason r);

// What happens when a sequence reaches the context (max_model_len):
enum class ContextPolicy : uint8_t {
  kError,  // it finishes with kLength; a longer prompt is refused (the default)
  kShift,  // StreamingLLM: the first blocks (sinks) and the most recent stay, whole blocks in
           // between are dropped, positions are re-assigned within the cache
};
const char* context_policy_name(ContextPolicy p);  // "error", "shift" (the flag's spelling)

}  // namespace hinge::sched
