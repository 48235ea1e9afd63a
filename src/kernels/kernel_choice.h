// Which weight layout each quantized type runs in on this CPU, chosen by measurement.
//
// A feature bit says what a CPU can run, not what is fastest on it: AMD Zen 4 has AVX-512 VNNI
// but runs 512-bit instructions as two halves with other latencies than Intel's, and the
// layout that wins on one lost on the other (issue 36: on Zen 4 the VNNI-pairs decode ran
// slower than the plain GGUF kernel). So where more than one layout runs, hinge times them
// once per process, on this CPU, and takes the fastest:
//
//   row-groups  PackedLayout::kAmxTiles: 16-row groups, lane n of a vpdpbusd = row n, no
//               horizontal sums; the AMX tile unit for 5+ tokens where it runs, else VNNI,
//               else AVX2 (Q5_K, Q6_K: never the tile unit; their row-group kernels on
//               AVX-512 VNNI where it runs, else AVX2).
//               F16 / BF16: PackedLayout::kFloatGroups, 16-row groups column by
//               column (an outer-product FMA kernel on AVX2, exact).
//   vnni-pairs  PackedLayout::kVnniPairs: pairs of blocks interleaved per row (Q8_0, Q4_0).
//   gguf        no copy: the GGUF blocks as stored (VNNI or pmaddubsw kernels).
//   bf16-tiles  PackedLayout::kBf16Tiles: F16 / BF16 weights as AMX-BF16 tiles (F16 rounded to
//               bf16), every token count on the tile unit.
//
// Rules, in order:
//   1. HINGE_WEIGHT_LAYOUT=row-groups|vnni-pairs|gguf forces one (where it runs) for A/B runs;
//      HINGE_DISABLE_PACKING=1 (model/transformer.cpp) and HINGE_DISABLE_AMX / _VNNI=1 still
//      remove candidates.
//   2. AMX-INT8 usable: row-groups for the types the tile unit runs (its tile kernel leads
//      prefill 2.6-4.3x; decode in the same layout on VNNI measured fastest there: 25.0 vs
//      23.0 (vnni-pairs) vs 18.3 (gguf) tok/s, llama-1b q8_0, 2 threads, Sapphire Rapids
//      class, 2026-12-06). Q5_K and Q6_K, which the tile unit does not run, are calibrated
//      (rule 5).
//   3. F16 / BF16 with AMX-BF16: bf16-tiles (prefill at the tile unit's rate; numerics in
//      docs/kernels.md). HINGE_WEIGHT_LAYOUT=gguf keeps the exact f32 FMA kernel.
//   4. One candidate: it.
//   5. Otherwise calibrated: a 1024 x 4096 matrix of the type (random weights) multiplies one
//      token (decode, best of 11 interleaved runs) and 64 tokens (best of 3) on the calling
//      thread; the lowest sum of (decode time / fastest decode) + (64-token time / fastest
//      64-token time) wins. About 50 ms per type, once per machine and build: the choice is
//      cached in a file that every later hinge process reads (layout_cache.h), so processes on
//      one machine run the same layout however busy it was when each started.
#pragma once

#include <string>
#include <vector>

#include "common/ggml_type.h"

namespace hinge::kernels {

enum class WeightLayout : uint8_t { kGguf, kVnniPairs, kRowGroups, kBf16Tiles };
const char* weight_layout_name(WeightLayout layout);

struct LayoutTiming {
  WeightLayout layout;
  double decode_us = 0;   // one token, best of the runs
  double prefill_us = 0;  // 64 tokens, best of the runs
};

struct LayoutChoice {
  GgmlType type = GgmlType::Q8_0;
  WeightLayout layout = WeightLayout::kGguf;
  std::string reason;                // "forced by HINGE_WEIGHT_LAYOUT", "AMX", "calibrated", ...
  std::vector<LayoutTiming> timings; // calibrated candidates (empty otherwise)
};

// The layouts `type` can run in on this CPU now (the HINGE_DISABLE_* switches applied), in the
// order above; gguf is always last.
std::vector<WeightLayout> candidate_layouts(GgmlType type);

// The layout for `type` (cached per type and candidate set, in memory and, where calibrated, in
// the layout cache file; thread-safe).
LayoutChoice choose_weight_layout(GgmlType type);

// Calibrates every type that has packed layouts again (where rule 5 applies), ignoring and
// rewriting the cache file's entries; the choices, in Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, BF16
// order.
// Matrices packed before keep their layout. For `hinge bench --layouts`.
std::vector<LayoutChoice> recalibrate_weight_layouts();

// Forgets this process's choices (tests: the next choose_weight_layout reads the file again).
void forget_weight_layout_choices();

// The choices made so far in this process, one line each ("q8_0: row-groups (calibrated:
// row-groups 41 us, vnni-pairs 52 us, gguf 60 us per decode product)").
std::vector<std::string> layout_choice_summary();

}  // namespace hinge::kernels
