// KvArena: the bytes of the paged KV cache. One allocation made at start-up (anonymous mmap,
// pages committed on first touch), cut into num_blocks fixed-size blocks laid out as KvSpec
// describes. A block holds one KV group's layers (which group is the block tables' business):
//
//   block b  = base + b * bytes_per_block         bytes_per_block = layers_per_block * layer_bytes
//   layer l  = block + i * layer_bytes            i = l's index in its group,
//                                                 layer_bytes = bs * H * (k_row + v_row)
//     K rows   [bs tokens][H kv heads][k_row bytes]
//     V rows   [bs tokens][H kv heads][v_row bytes]   at + bs * H * k_row
//
// A physical slot s (token) is block s / bs, offset s % bs. The arena also keeps the fp8
// per-tensor scales, one per (layer, K or V): 0 until calibrated from the first data written
// (the model sets them), then fixed for the arena's life.
//
// Thread-safety: the geometry is immutable; bytes are written by the engine thread's forward
// pass (in parallel over disjoint slots) and read by attention.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kv/kv_ids.h"
#include "kv/kv_spec.h"

namespace hinge::kv {

class KvArena {
 public:
  // Errors: invalid spec, num_blocks < 1, a block or arena size beyond int64, allocation
  // failure (message says how much).
  static StatusOr<KvArena> create(const KvSpec& spec, int64_t num_blocks);

  KvArena(KvArena&& other) noexcept;
  KvArena& operator=(KvArena&& other) noexcept;
  KvArena(const KvArena&) = delete;
  KvArena& operator=(const KvArena&) = delete;
  ~KvArena();

  const KvSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t bytes() const { return num_blocks_ * bytes_per_block_; }
  uint8_t* base() const { return base_; }

  int64_t bytes_per_block() const { return bytes_per_block_; }
  int64_t k_row_bytes() const { return k_row_; }
  int64_t v_row_bytes() const { return v_row_; }
  int64_t layer_bytes() const { return layer_bytes_; }
  // KV group of layer l (whose block table its attention reads).
  int32_t group_of_layer(int32_t layer) const { return layer_group_[static_cast<size_t>(layer)]; }
  // Offsets from a block's start.
  int64_t k_offset(int32_t layer) const {
    return layer_index_[static_cast<size_t>(layer)] * layer_bytes_;
  }
  int64_t v_offset(int32_t layer) const {
    return k_offset(layer) + int64_t{spec_.block_size_tokens} * spec_.n_kv_heads * k_row_;
  }
  int64_t k_token_stride() const { return int64_t{spec_.n_kv_heads} * k_row_; }
  int64_t v_token_stride() const { return int64_t{spec_.n_kv_heads} * v_row_; }

  // Copy-on-write: the whole block (every layer of its group, K and V).
  void copy_block(BlockId src, BlockId dst);

  // Returns the pages that lie wholly inside these blocks to the OS (madvise MADV_DONTNEED):
  // RSS falls by what was resident of them, and their bytes read as zero until written again.
  // Only for blocks no request uses (free or withheld under memory pressure). Adjacent blocks
  // are merged, so blocks smaller than a page release the pages they cover together.
  // Returns the bytes advised (page-rounded).
  int64_t release_pages(std::span<const BlockId> blocks);
  // Bytes of the arena resident now (mincore over the mapping: pages written and not returned
  // since). With `per_block`, also one flag per block: 1 when any of its pages is resident.
  int64_t resident_bytes(std::vector<uint8_t>* per_block = nullptr) const;

  // fp8 per-tensor scales (0 = not yet calibrated).
  float k_scale(int32_t layer) const { return k_scale_[static_cast<size_t>(layer)]; }
  float v_scale(int32_t layer) const { return v_scale_[static_cast<size_t>(layer)]; }
  void set_k_scale(int32_t layer, float s) { k_scale_[static_cast<size_t>(layer)] = s; }
  void set_v_scale(int32_t layer, float s) { v_scale_[static_cast<size_t>(layer)] = s; }

  // K shift of quantized K dtypes, one vector [n_kv_heads * head_dim] per layer: the model
  // stores k - shift instead of k. Attention is unchanged by it (each query's scores move by the
  // same q . shift, which softmax cancels), while quantization sees smaller values when keys
  // share a large common component. Calibrated (mean of the first K written), then fixed.
  float* k_shift(int32_t layer) {
    return &k_shift_[static_cast<size_t>(layer) * static_cast<size_t>(kv_dim_)];
  }
  std::span<const float> k_shifts() const { return k_shift_; }  // every layer's, in order
  bool k_shift_ready(int32_t layer) const { return k_shift_ready_[static_cast<size_t>(layer)] != 0; }
  void set_k_shift_ready(int32_t layer) { k_shift_ready_[static_cast<size_t>(layer)] = 1; }

 private:
  KvArena() = default;
  void release();

  KvSpec spec_;
  int64_t num_blocks_ = 0;
  int64_t bytes_per_block_ = 0;
  int64_t k_row_ = 0, v_row_ = 0, layer_bytes_ = 0;
  std::vector<int32_t> layer_group_, layer_index_;  // per layer
  uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<float> k_scale_, v_scale_;
  int64_t kv_dim_ = 0;
  std::vector<float> k_shift_;
  std::vector<uint8_t> k_shift_ready_;
  mutable std::vector<unsigned char> resident_pages_;  // resident_bytes' mincore vector, reused
};

}  // namespace hinge::kv
