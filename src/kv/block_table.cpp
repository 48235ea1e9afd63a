#include "kv/block_table.h"

namespace hinge::kv {

int64_t BlockTable::slot(int64_t position, int32_t block_size_tokens) const {
  HINGE_CHECK(block_size_tokens > 0 && position >= 0);
  const int64_t logical = position / block_size_tokens;
  HINGE_CHECK_MSG(logical < num_blocks(), "position {} beyond table of {} blocks", position,
                  num_blocks());
  return int64_t{blocks_[static_cast<size_t>(logical)].value} * block_size_tokens +
         position % block_size_tokens;
}

}  // namespace hinge::kv
