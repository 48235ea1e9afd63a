// What the engine refuses before anything is queued: a request with an empty prompt, token ids
// out of the vocabulary, more tokens than the context, bad sampling parameters. Errors say which
// value and what is accepted. (EngineConfig::validate lives next to it.)
#pragma once

#include "hinge/engine.h"
#include "model/model_config.h"

namespace hinge {

// Under ContextPolicy::kShift only the prompt must fit the context (the output may go on).
Status check_generate_request(const GenerateRequest& req, const ModelConfig& model,
                              int32_t max_model_len, int32_t max_num_seqs,
                              ContextPolicy policy = ContextPolicy::kError);

}  // namespace hinge
