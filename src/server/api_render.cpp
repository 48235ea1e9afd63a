// POST /v1/chat/completions/render and /v1/completions/render (vLLM's renderer endpoints, which
// llm-d's scheduler calls to learn a request's token ids before it picks a replica): the body is
// the generation request itself; the answer is the prompt's token ids as this server would
// compute them (chat template, tools, special tokens), nothing generated:
//   {"request_id": "chatcmpl-<hex>" | "cmpl-<hex>", "model", "token_ids": [...],
//    "prompt_tokens": N, "max_model_len"}
// The same checks as generation (a 400 naming the field, 404 for another model); prompt text is
// never logged.
#include <random>

#include <fmt/format.h>

#include "server/api_server.h"
#include "server/openai_response.h"

namespace hinge::server {

void ApiServer::handle_render(Endpoint endpoint, const HttpRequest& r, const ExchangePtr& ex) {
  auto req = endpoint == Endpoint::kChatCompletions ? parse_chat_request(r.body)
                                                    : parse_completion_request(r.body);
  if (!req.ok()) return respond_error(ex, req.error());
  if (!req->model.empty() && !serves(req->model))
    return respond_error(ex, ApiError::not_found(fmt::format("The model `{}` does not exist; this "
                                                             "server serves `{}`",
                                                             req->model, config_.model_name),
                                                 "model"));
  std::vector<int32_t> ids;
  if (endpoint == Endpoint::kChatCompletions) {
    auto p = chat_prompt(req->messages, req->tools);
    if (!p.ok()) return respond_error(ex, p.error());
    ids = std::move(p->tokens);
  } else if (req->prompt_is_tokens) {
    ids = std::move(req->prompt_token_ids);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= config_.n_vocab)
        return respond_error(ex, ApiError::invalid_request(
                                     fmt::format("prompt[{}]", i),
                                     fmt::format("token id {} is out of range [0, {})", ids[i], config_.n_vocab)));
  } else {
    if (auto e = check_prompt_bytes(req->prompt_text.size(), "prompt")) return respond_error(ex, *e);
    ids = tok_.encode(req->prompt_text, /*add_special=*/true, /*parse_special=*/false);
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  OJson j = OJson::object();
  j["request_id"] = fmt::format("{}{:016x}{:08x}", endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-",
                                rng(), static_cast<uint32_t>(rng()));
  j["model"] = config_.model_name;
  j["token_ids"] = ids;
  j["prompt_tokens"] = ids.size();
  j["max_model_len"] = engine_.max_model_len();
  HttpResponse resp;
  resp.status = 200;
  resp.body = to_body(j);
  respond(ex, std::move(resp));
}

}  // namespace hinge::server
