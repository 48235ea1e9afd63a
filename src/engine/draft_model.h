// Speculative decoding's draft model (--speculative draft --draft-model FILE, issue 38): a
// smaller model with the target's vocabulary proposes each decoding request's next k tokens by
// decoding them itself, batched across requests, over a small paged KV cache of its own.
//
// The step that completes a request's prompt catches the draft up on it (catch_up_prefilled:
// every token but the last, no draft), so the draft's prefill counts in the time to the first
// token, as the target's does. Then per step (EngineImpl::propose_drafts, before schedule()):
//   1. sync     each request's draft sequence is compared with the request's tokens: the
//               drafts it fed last time that the target accepted stay, the rest is rolled
//               back by moving the sequence's length (no copy);
//   2. catch up the tokens the draft has not computed (the prompt on a request's first step,
//               then the accepted tokens and the target's own next token) go through the draft
//               in chunks of at most max_batch_tokens, every request in the same passes; the
//               last row of each request gives its first draft;
//   3. decode   k - 1 more passes of one token per request give the other drafts.
// A draft is the draft's argmax for a greedy request; for a sampled one it is drawn from the
// draft's own distribution q (the request's temperature, top-k, top-p, min-p and logit bias;
// no penalties, no grammar), recorded for verification's rejection sampling (spec_decode.h).
// The draft's random stream is its own (seeded from the sample's seed), so the same seed gives
// the same drafts and therefore the same output.
//
// Memory: the arena holds as many tokens as the target's (num_tokens), blocks of block_size
// tokens from a free list; a request that finds none free drafts nothing this step and its
// blocks go back to the list at once (it catches up from the start when it drafts again).
// A request's blocks go back when it leaves or stops drafting (release).
// A lossy KV dtype is calibrated at creation, as the target's (engine/kv_calibration.h).
// Engine-thread only; the draft's forward passes run on the engine's pool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "engine/sampler.h"
#include "kv/kv_arena.h"
#include "kv/kv_ids.h"
#include "model/loaded_model.h"
#include "model/transformer.h"

namespace hinge {

// One request's drafts to propose.
struct DraftJob {
  kv::RequestId id;
  std::span<const int32_t> tokens;  // its sequence; the last token is not computed yet
  // Drafts wanted (fewer near the draft's context); 0: catch up only (every token but the
  // last, no draft).
  int32_t k = 0;
  Sampler* sampler = nullptr;       // sampled drafts from q; null: the draft's argmax
  float* probs = nullptr;           // with a sampler: q of draft i at probs[i * n_vocab]
  std::vector<int32_t>* out = nullptr;  // the drafts (cleared first; none when it cannot draft)
};

struct DraftModelStats {
  int64_t forward_passes = 0;
  int64_t tokens_computed = 0;  // catch-up and draft tokens through the draft model
  double seconds = 0;           // in propose()
  int32_t sequences = 0;        // requests holding draft KV now
  int64_t kv_bytes = 0;         // the draft's arena
};

class DraftModel {
 public:
  // num_tokens: the KV capacity in tokens (the target's); max_seqs: requests drafting at once.
  static StatusOr<std::unique_ptr<DraftModel>> create(const LoadedModel& model, ThreadPool& pool,
                                                      kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                                                      int32_t block_size, int64_t num_tokens,
                                                      int32_t max_batch_tokens, int32_t max_seqs);

  // Proposes every job's drafts. A job whose sequence does not fit the draft's context or KV
  // gets none. Errors: the draft's forward pass failed (no job gets drafts).
  Status propose(std::span<DraftJob> jobs);

  // Returns the KV of request id (none held: nothing): when it finishes or stops drafting.
  void release(kv::RequestId id);

  DraftModelStats stats() const;
  const ModelConfig& config() const { return model_.config; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;  // physical blocks, logical order
    int32_t num_computed = 0;     // positions [0, num_computed) hold K/V
    // What the last propose() fed after the request's tokens: drafts 1..k-1 at positions
    // fed_from, fed_from + 1, ...
    int32_t fed_from = 0;
    std::vector<int32_t> fed;
  };
  // A piece of one job's tokens in a forward pass.
  struct Piece {
    size_t job;
    int32_t first_position;
    int32_t count;
    bool last;  // its last row gives a draft
  };

  DraftModel(const LoadedModel& model, ThreadPool& pool, kv::KvArena arena, int32_t block_size,
             int32_t max_batch_tokens, int32_t max_seqs);

  // The positions of `tokens` the draft still holds (what it fed that the request kept).
  static int32_t valid_prefix(const Seq& s, std::span<const int32_t> tokens);
  // A failed forward pass: no job gets drafts and every sequence's KV goes back (what was
  // written is unknown). Returns st.
  Status failed(std::span<DraftJob> jobs, Status st);
  // Blocks for positions [0, n); false (its blocks returned) when the pool runs out.
  bool reserve(Seq& s, int32_t n);
  void free_seq(Seq& s);
  // One forward pass of `pieces` (tokens from token_buf_); fills the pieces' last rows' logits.
  Status run(std::span<const Piece> pieces, std::span<DraftJob> jobs);
  // Draft i of job j from its logits row.
  void draw(DraftJob& job, int32_t i, const float* logits);

  const LoadedModel& model_;
  kv::KvArena arena_;
  Transformer transformer_;
  int32_t block_size_;
  int32_t max_batch_tokens_;
  std::vector<int32_t> free_blocks_;
  std::unordered_map<kv::RequestId, Seq> seqs_;
  std::vector<Seq*> job_seqs_;  // per job of the current propose(); null: skipped
  // Per-pass buffers (capacity kept).
  std::vector<int32_t> tokens_;
  std::vector<int64_t> slots_;
  std::vector<kernels::AttentionSeq> attn_;
  std::vector<int32_t> logit_rows_;
  std::vector<float> logits_;
  std::vector<Piece> pieces_;
  std::vector<int32_t> pending_;  // per job: next position to catch up
  SamplerScratch scratch_;
  DraftModelStats stats_;
};

}  // namespace hinge
