#include "engine/cache_identity.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <string>

#include "model/loaded_model.h"

namespace hinge {

namespace {

uint64_t weight_digest(const kernels::MatrixView& m) {
  if (m.data == nullptr) return 0;
  const size_t bytes = std::min<size_t>(size_t{64} << 10, static_cast<size_t>(m.rows) * m.row_bytes);
  return XXH3_64bits(m.data, bytes);
}

}  // namespace

uint64_t kv_cache_fingerprint(const LoadedModel& model, const kv::KvSpec& spec) {
  const ModelConfig& c = model.config;
  std::string id = fmt::format(
      "layout {} | {} vocab {} dim {} layers {} heads {}/{} head_dim {} ffn {} rope {} {} {} {} "
      "{} {} {} | local {} {} {} | recipe {} {} {} {} {} {} {} {} {} {} {} {} | "
      "k {} v {} block {} | embd {:x} out {:x}",
      kKvLayoutVersion, c.architecture, c.n_vocab, c.dim, c.n_layers, c.n_heads, c.n_kv_heads,
      c.head_dim, c.ffn_dim, c.rope.theta, static_cast<int>(c.rope.style), c.rope.n_rot,
      c.rope.freq_scale, c.rope.ext_factor, c.rope.attn_factor, c.rope.freq_factors.size(),
      c.sliding_window, c.rope_local.theta, c.rope_local.freq_scale, c.pre_norms, c.post_norms,
      static_cast<int>(c.qk_norm), static_cast<int>(c.activation), c.extras, c.attn_scale,
      c.attn_softcap, c.embed_scale, c.residual_scale, c.attn_temp_scale, c.attn_temp_floor,
      c.rms_eps, kv::kv_dtype_name(spec.k_dtype), kv::kv_dtype_name(spec.v_dtype),
      spec.block_size_tokens, weight_digest(model.weights.token_embd),
      weight_digest(model.weights.output));
  for (uint8_t f : c.layer_local) id += f ? 'L' : 'G';
  for (const RopeConfig* r : {&c.rope, &c.rope_local})
    id += fmt::format(" | rope {} {} {} {} {} {} {} {}", r->n_rot, r->theta, r->freq_scale,
                      r->ext_factor, r->attn_factor, r->beta_fast, r->beta_slow, r->n_ctx_orig);
  // Which layers a block holds: its group's (one group: every layer).
  for (const kv::KvGroup& g : spec.groups) {
    id += " | group";
    for (int32_t l : g.layers) id += fmt::format(" {}", l);
  }
  uint64_t h = XXH3_64bits(id.data(), id.size());
  if (!c.rope.freq_factors.empty())
    h = XXH3_64bits_withSeed(c.rope.freq_factors.data(),
                             c.rope.freq_factors.size() * sizeof(float), h);
  return h;
}

}  // namespace hinge
