// The work a model does per token, for roofline shares: multiply-adds of a prefill token and
// bytes of a decoded one (ModelWeights::bytes_per_token plus the KV read).
#pragma once

#include <cstdint>

namespace hinge {
struct ModelConfig;
struct ModelWeights;
}  // namespace hinge

namespace hinge::roofline {

// FLOPs (2 per multiply-add) per prompt token of a P-token prefill from an empty cache: the
// layer matrices, plus causal attention (QK and PV, each head over its keys: the mean context
// is (P + 1) / 2, capped by a layer's sliding window). The output matrix runs for the last
// token only and is left out, as llama-bench's figures leave it out.
double prefill_flops_per_token(const ModelConfig& config, const ModelWeights& weights,
                               int64_t prompt_tokens);

// Whether the layer matrices are integer-quantized (their products run on int8 units: VNNI,
// AMX-INT8) or floating point (F32, F16, BF16: FMA, AVX-512 BF16, AMX-BF16).
bool weights_run_on_integer_units(const ModelWeights& weights);

}  // namespace hinge::roofline
