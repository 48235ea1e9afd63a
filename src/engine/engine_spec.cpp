// Speculative decoding's proposal step (engine/spec_decode.h): before schedule(), every
// decoding request gets this step's drafts; verification is in sample() (engine_step.cpp).
#include "engine/engine_impl.h"

namespace hinge::engine_detail {

void EngineImpl::propose_drafts() {
  for (RequestId id : sched_.running()) {
    const sched::Request* r = sched_.find(id);
    if (r == nullptr || r->fork_pending() || r->num_tokens() - r->num_computed_tokens() != 1)
      continue;
    auto it = book_.samples.find(id);
    if (it == book_.samples.end()) continue;
    SampleState& st = it->second;
    // Forced tokens (evaluation) decode one at a time; a grammar's requests draft too (their
    // masks follow the accepted drafts during verification).
    if (!st.params->forced_tokens.empty()) continue;
    if (st.spec.k_max() == 0) st.spec = SpecController(config_.spec_k);
    draft_.clear();
    if (config_.spec_verify_k > 0) {  // the verification-cost benchmark
      draft_.assign(static_cast<size_t>(config_.spec_verify_k), r->token_ids().back());
      sched_.set_spec_tokens(id, draft_);
      continue;
    }
    const int32_t k = st.spec.next_k();
    if (k > 0)
      ngram_draft(r->token_ids(), config_.spec_ngram_min, config_.spec_ngram_max, k, &draft_);
    sched_.set_spec_tokens(id, draft_);  // none: clears what an earlier step left
  }
}

}  // namespace hinge::engine_detail
