// A trained Llama-architecture model rewritten as another family's GGUF that computes the same
// function, for parity tests on trained weights (greedy decisions with real margins, where
// random-weight models tie too often) in every file layout that can hold it:
//   llama, mistral3  the same tensors;
//   granite          unit embedding/residual/logit scales, attention scale 1/sqrt(head_dim);
//   qwen2            zero Q/K/V biases, Q/K rows in rotate-half (NEOX) order;
//   phi3             fused attn_qkv and gate|up ffn_up, rotate-half Q/K rows.
// (qwen3's Q/K norms, olmo2's norm placement and Gemma's GELU and scalings change the function,
// so those families are refused.)
// Dimensions are widened to multiples of 256, so that every k-quant applies, with zeros: the extra
// embedding dimensions stay 0 through the residual stream, extra heads have zero Q/K/V (their
// attention output is 0), extra FFN units zero gate/up rows; RMSNorm stays exact with the norm
// weights scaled by sqrt(dim / dim') and eps by dim / dim'.
#pragma once

#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"
#include "model/loaded_model.h"

namespace hinge {

// The families write_transplanted_model accepts.
const std::vector<std::string>& transplant_families();

// Writes `source` (architecture llama, any weight types) as a `family` GGUF with matrices of
// `type` (Q4_K files keep the output matrix in Q6_K, as Q4_K_M files do).
// min_width > 0 widens further: the embedding to at least min_width and the FFN by the same
// factor (both multiples of 256) — the same function at the cost of a larger model, which
// makes a costly target with an exact small draft (bench/speculative).
Status write_transplanted_model(const LoadedModel& source, const std::string& family,
                                GgmlType type, const std::string& path, int64_t min_width = 0);

}  // namespace hinge
