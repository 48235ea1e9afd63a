// Query rotations of shifted blocks (kernels::AttentionSeq::block_rotation): a sequence whose
// cached keys were written at other positions (the context shift) reads block k with its query
// rotated by the block's offset. One cos/sin table per offset, made once (offsets are multiples
// of the block size up to the context); the pointers of one step are kept together.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"

namespace hinge {

class RopeRotations {
 public:
  // rope: the model's global RoPE table; block_size: the KV block size in tokens.
  RopeRotations(const kernels::RopeTable& rope, int32_t block_size)
      : rope_(&rope), block_size_(block_size) {}

  // Room for `pointers` per step, so that a step allocates only when an offset is first seen.
  void reserve(size_t pointers) { ptrs_.reserve(pointers); }
  // The start of a step: the previous step's pointers are dropped.
  void clear() { ptrs_.clear(); }
  // The tables of these offsets (nullptr for 0: no rotation), in order; valid for the step.
  const float* const* tables(std::span<const int32_t> offsets);

 private:
  const kernels::RopeTable* rope_;
  int32_t block_size_;
  std::vector<const float*> ptrs_;           // this step's
  std::vector<std::vector<float>> tables_;   // [offset / block_size]: cos, sin
};

}  // namespace hinge
