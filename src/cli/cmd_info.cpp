// `hinge info`: what a model file holds and what its KV cache costs.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/units.h"
#include "model/kv_cache.h"
#include "model/loaded_model.h"

namespace hinge::cli {

int info_command(const InfoArgs& args) {
  LoadOptions opts;
  opts.tokenizer_path = args.tokenizer;
  opts.require_vocab = false;
  auto m = load_model(args.model, opts);
  if (!m.ok()) return fail(m.status().message());
  const LoadedModel& model = **m;
  const ModelConfig& c = model.config;
  std::string out;
  out += fmt::format("model:          {}\n", model.path);
  out += fmt::format("format:         {}\n", model_format_name(model.format));
  out += fmt::format("file size:      {} ({} bytes)\n", format_bytes(model.file_bytes), model.file_bytes);
  out += fmt::format("architecture:   {}{}\n", c.architecture, c.name.empty() ? "" : " (" + c.name + ")");
  out += fmt::format("parameters:     {} ({})\n", format_count(model.num_parameters()), model.num_parameters());
  if (model.vocab.tokens.empty()) {
    out += fmt::format("vocab:          {} tokens (tokenizer not loaded: pass --tokenizer)\n", c.n_vocab);
  } else {
    out += fmt::format("vocab:          {} tokens, tokenizer '{}'{}\n", c.n_vocab, model.vocab.model,
                       model.vocab.pre.empty() ? "" : " pre '" + model.vocab.pre + "'");
  }
  out += fmt::format("context:        {}\n", c.context_length);
  out += fmt::format("embedding:      {}\n", c.dim);
  out += fmt::format("layers:         {}\n", c.n_layers);
  out += fmt::format("heads:          {} query, {} kv (GQA group {}), head dim {}\n", c.n_heads,
                     c.n_kv_heads, c.n_heads / c.n_kv_heads, c.head_dim);
  out += fmt::format("feed-forward:   {}\n", c.ffn_dim);
  out += fmt::format("rms eps:        {:g}\n", c.rms_eps);
  out += fmt::format("rope:           theta {:g}, {}{}{}{}\n", c.rope.theta,
                     c.rope.style == kernels::RopeStyle::kNeox ? "rotate-half (NEOX)" : "interleaved",
                     c.rope.n_rot < c.head_dim ? fmt::format(", {} of {} dims", c.rope.n_rot, c.head_dim) : "",
                     c.rope.freq_factors.empty() ? "" : ", per-pair frequency factors",
                     c.rope.ext_factor != 0.0f ? fmt::format(", YaRN x{:g}", 1.0f / c.rope.freq_scale)
                     : c.rope.freq_scale != 1.0f ? fmt::format(", linear x{:g}", 1.0f / c.rope.freq_scale) : "");
  if (c.num_local_layers() > 0)
    out += fmt::format("sliding window: {} tokens on {} of {} layers (local rope theta {:g})\n",
                       c.sliding_window, c.num_local_layers(), c.n_layers, c.rope_local.theta);
  out += fmt::format("output:         {}\n", c.tied_output ? "tied to token embedding" : "separate matrix");
  out += fmt::format("weights:        {}\n", format_bytes(model.weights.total_bytes()));
  const int64_t kv_f32 = c.kv_bytes_per_token(4), kv_f16 = c.kv_bytes_per_token(2);
  out += fmt::format("KV per token:   {} bytes f32, {} bytes f16  (2 x {} layers x {} kv heads x {} dims x bytes)\n",
                     kv_f32, kv_f16, c.n_layers, c.n_kv_heads, c.head_dim);
  out += fmt::format("KV at context:  {} f32, {} f16 ({} tokens)\n",
                     format_bytes(static_cast<uint64_t>(kv_f32 * c.context_length)),
                     format_bytes(static_cast<uint64_t>(kv_f16 * c.context_length)), c.context_length);
  if (c.num_local_layers() > 0) {
    // What the engine's KV groups hold (model/kv_cache.h window_groups): full-attention groups
    // every position, sliding-window groups at most window - 1 positions plus one block.
    constexpr int64_t kBlock = 16;
    const auto groups = window_groups(c);
    int64_t full_layers = 0, local_layers = 0, local_groups = 0, per_block = 0;
    for (const kv::KvGroup& g : groups) {
      (g.window ? local_layers : full_layers) += static_cast<int64_t>(g.layers.size());
      local_groups += g.window > 0;
      per_block = std::max<int64_t>(per_block, static_cast<int64_t>(g.layers.size()));
    }
    const int64_t full_groups = static_cast<int64_t>(groups.size()) - local_groups;
    const int64_t layer_f16 = kv_f16 / c.n_layers;
    const int64_t window_tokens = std::min<int64_t>(
        c.context_length, ((c.sliding_window - 1 + kBlock - 1) / kBlock + 1) * kBlock);
    // A block holds the largest group's layers (smaller groups leave the rest unused).
    const int64_t held =
        layer_f16 * per_block * (full_groups * c.context_length + local_groups * window_tokens);
    out += fmt::format("KV groups:      {} of {} full-attention layers, {} of {} sliding-window layers "
                       "(window {}, blocks behind it released)\n",
                       full_groups, full_layers, local_groups,
                       local_layers, c.sliding_window);
    out += fmt::format("KV per token:   {} bytes f16 on full-attention layers; sliding-window layers "
                       "hold at most {} tokens ({} f16 per sequence)\n",
                       layer_f16 * per_block * full_groups, window_tokens,
                       format_bytes(static_cast<uint64_t>(layer_f16 * per_block * local_groups * window_tokens)));
    out += fmt::format("KV at context:  {} f16 per sequence with the windows, {} with full "
                       "attention ({:.1f}%)\n",
                       format_bytes(static_cast<uint64_t>(held)),
                       format_bytes(static_cast<uint64_t>(kv_f16 * c.context_length)),
                       100.0 * static_cast<double>(held) /
                           static_cast<double>(kv_f16 * c.context_length));
  }
  if (args.tensors) {
    out += fmt::format("\n{:<32} {:<8} {:>20} {:>12}\n", "tensor", "type", "shape (ne)", "bytes");
    for (const auto& t : model.tensors) {
      out += fmt::format("{:<32} {:<8} {:>20} {:>12}\n", t.name, ggml_type_name(t.view.type),
                         fmt::format("[{}]", fmt::join(t.ne, ", ")),
                         t.view.row_bytes * static_cast<uint64_t>(t.view.rows));
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace hinge::cli
