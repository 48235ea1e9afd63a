// Memory of packed weight copies (allocate_packed_bytes, kernels/packed_memory.cpp): small copies
// carved from shared huge-page chunks without overlapping, large ones on their own, every one
// 64-byte aligned and released with its last user (ASan / LSan check the releases).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/matmul_packed.h"

namespace hinge::kernels {
namespace {

using Bytes = std::unique_ptr<uint8_t[], PackedMatrix::Free>;

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

TEST(KernelsPackedMemory, SmallCopiesShareAChunkWithoutOverlap) {
  // Sizes of a small model's matrices and scales, odd ones rounded up to 64 bytes.
  const size_t sizes[] = {352 * 1024 + 5, 20 * 1024, 940 * 1024, 1, 64, 100, 1024 * 1024};
  std::vector<Bytes> copies;
  for (int round = 0; round < 6; ++round)
    for (size_t i = 0; i < std::size(sizes); ++i) {
      copies.push_back(allocate_packed_bytes(sizes[i]));
      ASSERT_TRUE(aligned(copies.back().get(), 64));
      std::memset(copies.back().get(), static_cast<int>(copies.size() & 0xFF), sizes[i]);
    }
  // Every byte still holds its own copy's value: no two copies overlap.
  for (size_t c = 0; c < copies.size(); ++c) {
    const size_t n = sizes[c % std::size(sizes)];
    const auto want = static_cast<uint8_t>((c + 1) & 0xFF);
    EXPECT_EQ(copies[c][0], want) << c;
    EXPECT_EQ(copies[c][n - 1], want) << c;
  }
  // Two small copies made one after the other come from one chunk, 64-byte steps apart (a
  // second try where the first pair straddled the end of a chunk).
  Bytes a = allocate_packed_bytes(1000), b = allocate_packed_bytes(1000);
  if (a.get_deleter().chunk != b.get_deleter().chunk) {
    a = allocate_packed_bytes(1000);
    b = allocate_packed_bytes(1000);
  }
  EXPECT_EQ(b.get() - a.get(), 1024);
  EXPECT_TRUE(a.get_deleter().chunk != nullptr);
  EXPECT_EQ(a.get_deleter().chunk.get(), b.get_deleter().chunk.get());
}

TEST(KernelsPackedMemory, LargeCopiesHaveTheirOwnHugePageAlignedAllocation) {
  Bytes big = allocate_packed_bytes(size_t{3} << 20);
  ASSERT_NE(big.get(), nullptr);
  EXPECT_TRUE(aligned(big.get(), size_t{2} << 20));
  EXPECT_TRUE(big.get_deleter().chunk == nullptr);
  std::memset(big.get(), 7, size_t{3} << 20);
}

TEST(KernelsPackedMemory, AChunkLivesAsLongAsItsLastCopy) {
  Bytes first = allocate_packed_bytes(4096);
  Bytes second = allocate_packed_bytes(4096);
  std::weak_ptr<void> chunk = first.get_deleter().chunk;
  ASSERT_EQ(chunk.lock().get(), second.get_deleter().chunk.get());
  // Copies of other tests in this process may share the chunk: count relative to them.
  const long users = chunk.use_count();
  first.reset();
  EXPECT_EQ(chunk.use_count(), users - 1);  // the second copy still holds it
  second.reset();
  EXPECT_EQ(chunk.use_count(), users - 2);
  if (users == 2) {
    EXPECT_TRUE(chunk.expired());
    Bytes third = allocate_packed_bytes(4096);  // starts a new chunk, on a huge-page boundary
    EXPECT_TRUE(aligned(third.get(), size_t{2} << 20));
  }
}

}  // namespace
}  // namespace hinge::kernels
