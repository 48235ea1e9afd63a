// `hinge run`: load a model, generate, stream text to stdout, statistics to stderr.
#include <unistd.h>

#include <cstdio>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "engine/generator.h"
#include "model/loaded_model.h"

namespace hinge::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "hinge: %s\n", message.c_str());
  return 1;
}

int run_command(RunArgs args) {
  if (!args.seed) args.seed = std::random_device{}();
  args.sampling.seed = *args.seed;
  if (Status st = args.sampling.validate(); !st.ok()) return fail(st.message());

  std::unique_ptr<LoadedModel> loaded;
  {
    ProgressBar bar("loading");
    LoadOptions opts;
    opts.tokenizer_path = args.tokenizer;
    opts.progress = [&](double f) { bar.update(f); };
    auto m = load_model(args.model, opts);
    if (!m.ok()) return fail(m.status().message());
    loaded = std::move(m).value();
  }
  auto tok = Tokenizer::create(loaded->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  const Tokenizer& tokenizer = **tok;

  std::vector<int32_t> prompt;
  if (args.random_prompt > 0) {
    std::mt19937_64 rng(*args.seed);
    if (tokenizer.bos() >= 0) prompt.push_back(tokenizer.bos());
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(loaded->config.n_vocab - 1));
    while (static_cast<int64_t>(prompt.size()) < args.random_prompt) prompt.push_back(pick(rng));
  } else {
    prompt = tokenizer.encode(args.prompt, /*add_special=*/true, args.parse_special);
  }
  if (prompt.empty()) {
    if (tokenizer.bos() < 0)
      return fail(args.model + ": empty prompt and the vocabulary has no BOS token; pass -p TEXT");
    prompt.push_back(tokenizer.bos());
  }

  const LlamaConfig& cfg = loaded->config;
  int64_t ctx = args.ctx_size > 0 ? args.ctx_size : std::min<int64_t>(cfg.context_length, 4096);
  ctx = std::min(ctx, cfg.context_length);
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    return fail(fmt::format("prompt is {} tokens but the context holds {}; raise --ctx-size",
                            prompt.size(), ctx));

  const uint64_t kv_bytes = static_cast<uint64_t>(cfg.kv_bytes_per_token(sizeof(float))) *
                            static_cast<uint64_t>(ctx);
  const uint64_t ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  if (kv_bytes > ram / 2)
    return fail(fmt::format("a KV cache of {} tokens needs {}, more than half of this machine's "
                            "{}; lower --ctx-size", ctx, format_bytes(kv_bytes), format_bytes(ram)));
  const int threads = args.threads > 0 ? args.threads : hardware_threads();
  ThreadPool pool(threads);
  LlamaModel model(cfg, loaded->weights, pool, 64);
  KvCache cache(cfg, ctx);

  GenerationOptions gen;
  gen.max_new_tokens = args.n_predict;
  gen.sampling = args.sampling;
  if (!args.json) {
    gen.on_text = [](const std::string& text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  }
  auto result = generate(model, tokenizer, prompt, cache, gen);
  if (!result.ok()) return fail(result.status().message());
  const GenerationResult& r = *result;

  if (args.json) {
    nlohmann::json j;
    j["token_ids"] = r.token_ids;
    j["text"] = r.text;
    j["prompt_tokens"] = r.prompt_tokens;
    j["generated_tokens"] = r.generated_tokens;
    j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["achieved_gb_per_s"] = r.achieved_gb_per_s;
    j["finish_reason"] = r.finish_reason;
    j["seed"] = *args.seed;
    // Invalid UTF-8 (possible with byte tokens) is replaced rather than failing the dump.
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "hinge: prompt %lld tokens, prefill %.1f tok/s | generated %lld tokens, decode "
               "%.1f tok/s, %.2f GB/s | %d threads, seed %llu, finish: %s\n",
               static_cast<long long>(r.prompt_tokens), r.prefill_tokens_per_s,
               static_cast<long long>(r.generated_tokens), r.decode_tokens_per_s,
               r.achieved_gb_per_s, threads, static_cast<unsigned long long>(*args.seed),
               r.finish_reason.c_str());
  return 0;
}

}  // namespace hinge::cli
