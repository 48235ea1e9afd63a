#include "engine/kv_budget.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/units.h"

namespace hinge {

StatusOr<int64_t> kv_num_blocks(const KvBudgetInput& in) {
  HINGE_RETURN_IF_ERROR(in.spec.validate());
  const int64_t per_block = in.spec.bytes_per_block();
  int64_t budget = in.kv_memory_bytes;
  if (budget <= 0) {
    const int64_t left = in.available_bytes - in.weight_bytes;
    if (in.available_bytes <= 0)
      return Status::Error("cannot read the available memory; pass --kv-memory SIZE");
    if (left <= per_block)
      return Status::Errorf(
          "only {} of memory is available after {} of weights; free memory or pass --kv-memory",
          format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, in.available_bytes))),
          format_bytes(static_cast<uint64_t>(in.weight_bytes)));
    budget = static_cast<int64_t>(static_cast<double>(left) * in.kv_memory_fraction);
    const int64_t useful_tokens = 4 * std::max<int64_t>(1, in.max_num_seqs) *
                                  std::max<int64_t>(1, in.max_model_len);
    budget = std::min(budget, in.spec.bytes_for_tokens(useful_tokens));
  }
  const int64_t blocks = std::min(in.spec.num_blocks_in_budget(budget), kMaxKvBlocks);
  if (blocks < 1)
    return Status::Errorf("--kv-memory {} is below one KV block ({}); raise it",
                          format_bytes(static_cast<uint64_t>(budget)),
                          format_bytes(static_cast<uint64_t>(per_block)));
  return blocks;
}

int64_t available_memory_bytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<int64_t>(kib) * 1024;
}

}  // namespace hinge
