// Workload generators for `hinge simulate --workload NAME`, beside a JSONL trace and `hinge
// bench`'s own generator (cli/bench_workload.h). Every prompt starts with BOS (id 1); other ids
// are drawn uniformly from [3, vocab) by a seeded generator, so a workload is reproducible and
// only the shared parts (a system prompt, a document, a conversation so far) repeat.
//
//   chat   `requests` users, each sending `turns` messages: a turn's prompt is the whole
//          conversation so far (the system prompt, every earlier message and answer) plus the
//          new message; it is sent `think_s` after the previous answer ends, so the prefix cache
//          decides whether a turn recomputes the conversation. Conversations start at `rate`
//          per second (0: all at once).
//   rag    `requests` requests at `rate` per second, each the system prompt, one of `documents` documents
//          of `document_tokens` (drawn by popularity: Zipf with exponent `zipf`, document 0 the
//          most asked) and a question of its own: the documents' KV is reused while cached.
//   burst  `bursts` bursts of `requests` long prompts at once, `interval_s` apart: the cache
//          fills at once, and admission or preemption decides who waits.
// With `mixed_lengths`, a message / question / prompt is uniform in [1, message_tokens] and an
// answer in [1, output_tokens].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/simulator.h"

namespace hinge::plan {

struct WorkloadSpec {
  std::string name;            // chat, rag, burst
  int64_t vocab = 32000;
  uint64_t seed = 1234;
  int64_t system_tokens = 0;   // shared by every prompt
  int64_t message_tokens = 64; // a chat message, a RAG question, a burst's prompt
  int64_t output_tokens = 64;
  bool mixed_lengths = false;
  double rate = 0;             // chat: conversations, rag: requests per second (0: at once)
  int64_t requests = 8;         // chat: conversations, rag: requests, burst: per burst
  int64_t turns = 4;
  double think_s = 2;
  int64_t documents = 16, document_tokens = 512;
  double zipf = 1.0;
  int64_t bursts = 2;
  double interval_s = 10;
};

// The workload's requests (SimRequest::after links a conversation's turns). Errors: an unknown
// name, counts or lengths out of range.
StatusOr<std::vector<SimRequest>> generate_workload(const WorkloadSpec& spec);

}  // namespace hinge::plan
