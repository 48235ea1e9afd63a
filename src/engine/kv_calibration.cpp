#include "engine/kv_calibration.h"

#include <xxhash.h>

#include <algorithm>
#include <vector>

#include "kernels/paged_attention.h"

namespace hinge {

namespace {

bool has_calibration(const kv::KvSpec& s) {
  return kv::kv_dtype_is_quantized(s.k_dtype) || kv::kv_dtype_is_quantized(s.v_dtype);
}

// SplitMix64: a stated generator, so the calibration input is the same everywhere.
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t kv_calibration_digest(const kv::KvArena& arena) {
  const kv::KvSpec& s = arena.spec();
  if (!has_calibration(s)) return 0;
  std::vector<float> scales;
  for (int32_t l = 0; l < s.n_layers; ++l) {
    scales.push_back(arena.k_scale(l));
    scales.push_back(arena.v_scale(l));
  }
  uint64_t h = XXH3_64bits(scales.data(), scales.size() * sizeof(float));
  const auto shifts = arena.k_shifts();
  h = XXH3_64bits_withSeed(shifts.data(), shifts.size() * sizeof(float), h);
  return h == 0 ? 1 : h;
}

StatusOr<uint64_t> calibrate_kv(Transformer& model, kv::KvArena& arena, int32_t max_tokens) {
  const kv::KvSpec& s = arena.spec();
  if (!has_calibration(s)) return uint64_t{0};
  const int32_t bs = s.block_size_tokens;
  const int32_t groups = s.num_groups();
  const int64_t arena_tokens = arena.num_blocks() / groups * int64_t{bs};  // each group's blocks
  const int32_t n = static_cast<int32_t>(std::min<int64_t>(
      {kCalibrationTokens, max_tokens, model.max_batch_tokens(), arena_tokens}));
  if (n < 1) return Status::Error("KV calibration: no room for a single token");
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  uint64_t state = 0x68696E67655F6B76ull;  // "hinge_kv"
  for (int32_t& t : tokens) t = static_cast<int32_t>(splitmix64(&state) % static_cast<uint64_t>(n_vocab));
  // Positions 0..n-1 of group g in blocks g * nb .. of the arena: slot g * nb * bs + p.
  const int32_t nb = (n + bs - 1) / bs;
  std::vector<int64_t> slots;
  std::vector<int32_t> table;
  for (int32_t g = 0; g < groups; ++g) {
    for (int32_t p = 0; p < n; ++p) slots.push_back(int64_t{g} * nb * bs + p);
    for (int32_t j = 0; j < nb; ++j) table.push_back(g * nb + j);
  }
  std::vector<kernels::AttentionSeq> seqs(static_cast<size_t>(groups));
  for (int32_t g = 0; g < groups; ++g) {
    kernels::AttentionSeq& seq = seqs[static_cast<size_t>(g)];
    seq.query_begin = 0;
    seq.num_queries = n;
    seq.first_position = 0;
    seq.num_blocks = nb;
    seq.block_table = table.data() + static_cast<size_t>(g) * nb;
  }
  const int32_t rows[1] = {n - 1};
  ForwardBatch b;
  b.token_ids = tokens;
  b.slot_mapping = slots;
  b.seqs = seqs;
  b.logit_rows = rows;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  // The model calibrates every layer from the first K/V written to an uncalibrated arena.
  HINGE_RETURN_IF_ERROR(model.forward_batch(b, arena, logits.data()));
  return kv_calibration_digest(arena);
}

}  // namespace hinge
