#include "kv/kv_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hinge::kv {

StatusOr<KvArena> KvArena::create(const KvSpec& spec, int64_t num_blocks) {
  HINGE_RETURN_IF_ERROR(spec.validate());
  if (num_blocks < 1) return Status::Errorf("kv arena: needs at least one block, got {}", num_blocks);
  KvArena a;
  a.spec_ = spec;
  a.num_blocks_ = num_blocks;
  a.k_row_ = kv_dtype_head_bytes(spec.k_dtype, spec.head_dim);
  a.v_row_ = kv_dtype_head_bytes(spec.v_dtype, spec.head_dim);
  // Sizes are int64: every product is checked as it is made (a signed overflow is undefined
  // behaviour, and a check after it can be compiled away, which is what happened here).
  // bs x heads (two int32) always fits; the factors are positive (validated above), so once the
  // block size fits, any order of its product (KvSpec::bytes_per_block's) fits too.
  if (__builtin_mul_overflow(int64_t{spec.block_size_tokens} * spec.n_kv_heads,
                             a.k_row_ + a.v_row_, &a.layer_bytes_) ||
      __builtin_mul_overflow(a.layer_bytes_, int64_t{spec.layers_per_block()},
                             &a.bytes_per_block_))
    return Status::Errorf(
        "kv arena: a block of {} tokens x {} layers x {} KV heads x {} + {} bytes overflows int64",
        spec.block_size_tokens, spec.layers_per_block(), spec.n_kv_heads, a.k_row_, a.v_row_);
  a.layer_group_.resize(static_cast<size_t>(spec.n_layers));
  a.layer_index_.resize(static_cast<size_t>(spec.n_layers));
  for (int32_t l = 0; l < spec.n_layers; ++l) {
    a.layer_group_[static_cast<size_t>(l)] = spec.group_of_layer(l);
    a.layer_index_[static_cast<size_t>(l)] = spec.index_in_group(l);
  }
  HINGE_CHECK(a.bytes_per_block_ == spec.bytes_per_block());
  int64_t total = 0;
  if (__builtin_mul_overflow(a.bytes_per_block_, num_blocks, &total))
    return Status::Errorf("kv arena: {} blocks of {} bytes overflow int64", num_blocks,
                          a.bytes_per_block_);
  void* p = mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::Errorf("kv arena: cannot map {} bytes ({}); lower --kv-memory", total,
                          std::strerror(errno));
  a.base_ = static_cast<uint8_t*>(p);
  a.mapped_bytes_ = static_cast<size_t>(total);
  a.k_scale_.assign(static_cast<size_t>(spec.n_layers), 0.0f);
  a.v_scale_.assign(static_cast<size_t>(spec.n_layers), 0.0f);
  a.kv_dim_ = int64_t{spec.n_kv_heads} * spec.head_dim;
  a.k_shift_.assign(static_cast<size_t>(spec.n_layers * a.kv_dim_), 0.0f);
  a.k_shift_ready_.assign(static_cast<size_t>(spec.n_layers), 0);
  return a;
}

int64_t KvArena::release_pages(std::span<const BlockId> blocks) {
  if (blocks.empty() || base_ == nullptr) return 0;
  std::vector<int32_t> ids;
  ids.reserve(blocks.size());
  for (BlockId b : blocks) {
    HINGE_CHECK_MSG(b.value >= 0 && b.value < num_blocks_, "block {} out of range", b.value);
    ids.push_back(b.value);
  }
  std::sort(ids.begin(), ids.end());
  const int64_t page = std::max<long>(4096, sysconf(_SC_PAGESIZE));
  int64_t released = 0;
  auto advise = [&](int64_t first, int64_t last) {  // blocks [first, last]
    const int64_t begin = (first * bytes_per_block_ + page - 1) / page * page;
    const int64_t end = (last + 1) * bytes_per_block_ / page * page;
    if (end <= begin) return;
    if (madvise(base_ + begin, static_cast<size_t>(end - begin), MADV_DONTNEED) == 0)
      released += end - begin;
  };
  size_t i = 0;
  while (i < ids.size()) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] <= ids[j] + 1) ++j;
    advise(ids[i], ids[j]);
    i = j + 1;
  }
  return released;
}

int64_t KvArena::resident_bytes(std::vector<uint8_t>* per_block) const {
  if (per_block) per_block->assign(static_cast<size_t>(num_blocks_), 0);
  if (base_ == nullptr || mapped_bytes_ == 0) return 0;
  const int64_t page = sysconf(_SC_PAGESIZE);
  const size_t pages = (mapped_bytes_ + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
  std::vector<unsigned char>& vec = resident_pages_;
  vec.resize(pages);
  if (mincore(base_, mapped_bytes_, vec.data()) != 0) return 0;
  int64_t resident = 0;
  for (size_t i = 0; i < pages; ++i) {
    if (!(vec[i] & 1)) continue;
    resident += page;
    if (!per_block) continue;
    // Every block this page overlaps.
    const int64_t lo = static_cast<int64_t>(i) * page;
    const int64_t hi = std::min<int64_t>(lo + page, bytes()) - 1;
    for (int64_t b = lo / bytes_per_block_; b <= hi / bytes_per_block_ && b < num_blocks_; ++b)
      (*per_block)[static_cast<size_t>(b)] = 1;
  }
  return resident;
}

KvArena::KvArena(KvArena&& o) noexcept { *this = std::move(o); }

KvArena& KvArena::operator=(KvArena&& o) noexcept {
  if (this != &o) {
    release();
    spec_ = o.spec_;
    num_blocks_ = o.num_blocks_;
    bytes_per_block_ = o.bytes_per_block_;
    k_row_ = o.k_row_;
    v_row_ = o.v_row_;
    layer_bytes_ = o.layer_bytes_;
    layer_group_ = std::move(o.layer_group_);
    layer_index_ = std::move(o.layer_index_);
    base_ = std::exchange(o.base_, nullptr);
    mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
    k_scale_ = std::move(o.k_scale_);
    v_scale_ = std::move(o.v_scale_);
    kv_dim_ = o.kv_dim_;
    k_shift_ = std::move(o.k_shift_);
    k_shift_ready_ = std::move(o.k_shift_ready_);
    resident_pages_ = std::move(o.resident_pages_);
  }
  return *this;
}

KvArena::~KvArena() { release(); }

void KvArena::release() {
  if (base_) munmap(base_, mapped_bytes_);
  base_ = nullptr;
  mapped_bytes_ = 0;
}

void KvArena::copy_block(BlockId src, BlockId dst) {
  HINGE_CHECK(src.value >= 0 && src.value < num_blocks_ && dst.value >= 0 &&
              dst.value < num_blocks_ && src != dst);
  std::memcpy(base_ + dst.value * bytes_per_block_, base_ + src.value * bytes_per_block_,
              static_cast<size_t>(bytes_per_block_));
}

}  // namespace hinge::kv
