// Reference outputs from llama.cpp for hinge's parity tests (tests/model_family_parity_test.cpp).
// Built and run by scripts/peer-logits against the libllama of ../shared/tools/llamacpp-peer;
// never part of hinge's build.
//
//   peer_logits logits MODEL.gguf N_TOKENS SEED THREADS OUT.hlg
//     Evaluates N_TOKENS pseudo-random token ids (tokens_for(SEED), below) in one batch with
//     logits at every position (CPU, flash attention off, f32 KV) and writes
//       "HLG1", u32 n_pos, u32 n_vocab, u32 tokens[n_pos],
//       then per position: f32 scale (max |logit|), i16 q[n_vocab] (logit = q * scale / 32767).
//   peer_logits greedy MODEL.gguf N_PROMPT SEED THREADS N_GEN OUT.txt
//     Greedy continuation of N_GEN tokens after the first N_PROMPT ids of tokens_for(SEED),
//     decoded one token at a time; writes the prompt and the continuation as two lines of ids,
//     and a third line: at each step llama.cpp's margin (top-1 - top-2 logit) / max |logit|.
//     PEER_PROMPT="1 403 ..." (at most N_PROMPT ids) replaces the pseudo-random prompt.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

namespace {

// The same sequence hinge's test draws (tests/model_family_parity_test.cpp): a 64-bit LCG.
std::vector<int32_t> tokens_for(uint64_t seed, int n, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t[static_cast<size_t>(i)] = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return t;
}

void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int fail(const char* msg) {
  std::fprintf(stderr, "peer_logits: %s\n", msg);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) return fail("usage: logits MODEL N SEED THREADS OUT | greedy MODEL N SEED THREADS N_GEN OUT");
  const std::string mode = argv[1];
  const int n = std::atoi(argv[3]);
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  const int threads = std::atoi(argv[5]);
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (!model) return fail("cannot load the model");
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model)) > 0
                          ? llama_vocab_n_tokens(llama_model_get_vocab(model))
                          : std::atoi(std::getenv("PEER_VOCAB") ? std::getenv("PEER_VOCAB") : "0");
  if (n_vocab <= 0) return fail("unknown vocabulary size (set PEER_VOCAB)");
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.swa_full = true;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return fail("cannot create a context");

  if (mode == "logits") {
    const std::vector<int32_t> toks = tokens_for(seed, n, n_vocab);
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      b.token[i] = toks[static_cast<size_t>(i)];
      b.pos[i] = i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) return fail("llama_decode failed");
    FILE* out = std::fopen(argv[6], "wb");
    if (!out) return fail("cannot write the output");
    const uint32_t hdr[2] = {static_cast<uint32_t>(n), static_cast<uint32_t>(n_vocab)};
    std::fwrite("HLG1", 1, 4, out);
    std::fwrite(hdr, sizeof hdr, 1, out);
    for (int32_t t : toks) {
      const uint32_t u = static_cast<uint32_t>(t);
      std::fwrite(&u, 4, 1, out);
    }
    std::vector<int16_t> q(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n; ++i) {
      const float* l = llama_get_logits_ith(ctx, i);
      float scale = 0.0f;
      for (int v = 0; v < n_vocab; ++v) scale = std::max(scale, std::fabs(l[v]));
      for (int v = 0; v < n_vocab; ++v)
        q[static_cast<size_t>(v)] =
            static_cast<int16_t>(std::lround(scale > 0 ? l[v] / scale * 32767.0f : 0.0f));
      std::fwrite(&scale, 4, 1, out);
      std::fwrite(q.data(), 2, q.size(), out);
    }
    std::fclose(out);
    llama_batch_free(b);
  } else if (mode == "greedy" && argc >= 8) {
    const int n_gen = std::atoi(argv[6]);
    std::vector<int32_t> toks = tokens_for(seed, n, n_vocab);
    if (const char* ids = std::getenv("PEER_PROMPT")) {  // explicit prompt ids instead
      toks.clear();
      for (const char* p = ids; *p;) {
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p) break;
        toks.push_back(static_cast<int32_t>(v));
        p = end;
      }
      if (toks.empty() || static_cast<int>(toks.size()) > n) return fail("bad PEER_PROMPT");
    }
    const std::vector<int32_t> prompt = toks;
    std::vector<int32_t> gen;
    std::vector<float> gaps;  // llama.cpp's (top-1 - top-2) / max |logit| per step
    llama_batch b = llama_batch_init(std::max(n, 1), 0, 1);
    int pos = 0;
    std::vector<int32_t> feed = toks;
    for (int step = 0; step < n_gen; ++step) {
      b.n_tokens = static_cast<int32_t>(feed.size());
      for (size_t i = 0; i < feed.size(); ++i) {
        b.token[i] = feed[i];
        b.pos[i] = pos + static_cast<int32_t>(i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i + 1 == feed.size();
      }
      if (llama_decode(ctx, b) != 0) return fail("llama_decode failed");
      pos += static_cast<int>(feed.size());
      const float* l = llama_get_logits_ith(ctx, b.n_tokens - 1);
      const int32_t next = static_cast<int32_t>(std::max_element(l, l + n_vocab) - l);
      float second = -INFINITY, mx = 0.0f;
      for (int v = 0; v < n_vocab; ++v) {
        mx = std::max(mx, std::fabs(l[v]));
        if (v != next) second = std::max(second, l[v]);
      }
      gen.push_back(next);
      gaps.push_back((l[next] - second) / mx);
      feed = {next};
    }
    FILE* out = std::fopen(argv[7], "w");
    if (!out) return fail("cannot write the output");
    for (size_t i = 0; i < prompt.size(); ++i) std::fprintf(out, "%s%d", i ? " " : "", prompt[i]);
    std::fprintf(out, "\n");
    for (size_t i = 0; i < gen.size(); ++i) std::fprintf(out, "%s%d", i ? " " : "", gen[i]);
    std::fprintf(out, "\n");
    for (size_t i = 0; i < gaps.size(); ++i) std::fprintf(out, "%s%.6g", i ? " " : "", gaps[i]);
    std::fprintf(out, "\n");
    std::fclose(out);
    llama_batch_free(b);
  } else {
    return fail("unknown mode");
  }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
