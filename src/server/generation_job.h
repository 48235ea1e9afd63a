// One /v1/chat/completions or /v1/completions request, from body to the last byte: parse and
// validate, build the prompt (on a RequestWorkers thread: never an I/O or the engine thread),
// enqueue in the EngineThread (admission control may reject: 400 / 429 / 503 with
// Retry-After), then either collect every choice into one JSON response or stream SSE chunks
// as deltas arrive, ending with the usage chunk (include_usage) and `data: [DONE]`.
// Completions extras: `echo` puts the prompt text (a token prompt: detokenized) at the start of
// each choice, in its first chunk when streaming, and with `logprobs` the prompt tokens' logprobs
// (engine prompt logprobs; the first token's is null); `max_tokens` 0 with echo scores the
// prompt (one token is sampled and dropped: no completion text, 0 completion tokens, "length");
// `best_of` generates best_of samples (logprobs requested internally) and returns the n with the
// highest cumulative logprob of their returned tokens, usage counting all best_of samples. A client
// that goes away, or stops reading (http/server.h: counted in requests_aborted_total{reason=
// "client_too_slow"}), cancels the request (queued or running); its KV blocks are free within
// a step.
// Metrics: received, accepted/rejected (by reason), queue time, TTFT, inter-token latency,
// end-to-end latency, finish reasons. Nothing here logs prompt or completion text.
#pragma once

#include "server/api_server.h"
#include "server/openai_request.h"

namespace hinge::server {

void handle_generation(ApiServer& api, Endpoint endpoint, HttpRequest request,
                       ExchangePtr exchange, ApiServer::Caller caller);

}  // namespace hinge::server
