#include "engine/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "common/resident_memory.h"
#include "common/units.h"
#include "sched/kv_demand.h"

namespace hinge {
namespace {

std::string mib(int64_t bytes) { return format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, bytes))); }

}  // namespace

int64_t memory_reserve_bytes(int64_t budget_bytes) {
  return (int64_t{16} << 20) + budget_bytes / 100 * 3;
}

StatusOr<MemoryPlan> plan_memory(const MemoryBudgetInput& in) {
  MemoryPlan p;
  p.reserve_bytes = memory_reserve_bytes(in.budget_bytes);
  const int64_t resident = std::max<int64_t>(0, in.resident_bytes - in.model_resident_bytes);
  const int64_t packed = std::clamp<int64_t>(in.packed_bytes, 0, resident);
  const int64_t runtime = resident - packed;
  p.fixed_bytes = resident + in.model_kept_bytes + in.scratch_bytes + p.reserve_bytes;
  const std::string parts = fmt::format(
      "weights {} mapped + {} packed + runtime {} (libraries, heap, threads) + scratch {} + "
      "reserve {}",
      mib(in.model_kept_bytes), mib(packed), mib(runtime), mib(in.scratch_bytes),
      mib(p.reserve_bytes));
  const int64_t left = in.budget_bytes - p.fixed_bytes;
  if (left < in.kv_block_bytes) {
    const int64_t need = p.fixed_bytes + in.kv_block_bytes;
    // The reserve grows with the budget: the smallest budget b with b - reserve(b) >= need - reserve.
    const int64_t at_least =
        static_cast<int64_t>(static_cast<double>(need - p.reserve_bytes + (int64_t{16} << 20)) / 0.97) + 1;
    return Status::Errorf(
        "{} {} does not fit the model: {} = {} before any KV cache; raise it to at least {}, or "
        "use a smaller model or quantization",
        in.source, mib(in.budget_bytes), parts, mib(p.fixed_bytes), mib(at_least));
  }
  p.kv_bytes = in.kv_cap_bytes > 0 ? std::min(left, in.kv_cap_bytes) : left;
  p.breakdown = fmt::format("memory budget {} ({}): {} + KV arena {}{}", mib(in.budget_bytes),
                            in.source, parts, mib(p.kv_bytes),
                            p.kv_bytes < left ? fmt::format(" ({} unused)", mib(left - p.kv_bytes))
                                              : std::string());
  return p;
}

StatusOr<int64_t> kv_arena_blocks(const ArenaSizing& z, std::string* breakdown) {
  const KvBudgetInput& in = z.budget;
  if (z.memory_budget_bytes <= 0) return kv_num_blocks(in);
  MemoryBudgetInput m;
  m.budget_bytes = z.memory_budget_bytes;
  m.source = z.memory_budget_source;
  m.resident_bytes = process_resident_bytes();
  m.model_resident_bytes = resident_bytes_of(z.file_mappings);
  int64_t mapped = 0;
  for (const auto& f : z.file_mappings) mapped += static_cast<int64_t>(f.size());
  m.model_kept_bytes = std::max<int64_t>(0, mapped - z.dropped_file_bytes);
  m.packed_bytes = z.packed_bytes;
  // Buffers allocated after the arena: logits rows, per-thread sampler scratch (about 32 bytes
  // per vocabulary entry), per-step arrays.
  m.scratch_bytes = int64_t{z.max_num_seqs} * z.n_vocab * 4 + int64_t{z.threads} * z.n_vocab * 32 +
                    (int64_t{1} << 20);
  m.kv_block_bytes = in.spec.bytes_per_block();
  // At most --kv-memory, or what full concurrency at full length could use (4x, as
  // kv_num_blocks caps it).
  m.kv_cap_bytes = in.kv_memory_bytes > 0
                       ? in.kv_memory_bytes
                       : in.spec.bytes_for_tokens(4 * int64_t{z.max_num_seqs} *
                                                  std::max<int64_t>(1, in.max_model_len));
  HINGE_ASSIGN_OR_RETURN(const MemoryPlan plan, plan_memory(m));
  *breakdown = plan.breakdown;
  return std::min(in.spec.num_blocks_in_budget(plan.kv_bytes), kMaxKvBlocks);
}

int32_t budget_context_tokens(const ArenaSizing& z, int64_t blocks, int32_t max_model_len,
                              std::string* breakdown) {
  const kv::KvSpec& spec = z.budget.spec;
  const sched::KvDemandShape shape = sched::KvDemandShape::of(
      spec.block_size_tokens, spec.num_groups(), spec.group_windows(), z.max_batched_tokens);
  const int64_t fit =
      1 + sched::max_new_tokens_within(blocks, 1, 1, shape, int64_t{max_model_len} - 1);
  if (fit >= max_model_len) return max_model_len;
  *breakdown += fmt::format("; context lowered from {} to {} tokens (what this KV arena holds)",
                            max_model_len, fit);
  return static_cast<int32_t>(fit);
}

Status check_weights_fit(int64_t budget_bytes, const std::string& source,
                         std::span<const std::span<const uint8_t>> file_mappings,
                         uint64_t file_bytes, int64_t kv_block_bytes) {
  MemoryBudgetInput m;
  m.budget_bytes = budget_bytes;
  m.source = source;
  m.resident_bytes = process_resident_bytes();
  m.model_resident_bytes = resident_bytes_of(file_mappings);
  m.model_kept_bytes = static_cast<int64_t>(file_bytes);
  m.kv_block_bytes = kv_block_bytes;
  return plan_memory(m).status();
}

void fill_memory_budget_stats(const KvMemoryGuard& guard, EngineStats* s) {
  const KvMemoryGuardStats& g = guard.stats();
  s->memory_budget_bytes = guard.config().budget_bytes;
  s->rss_bytes = g.rss_bytes;
  s->rss_peak_bytes = g.rss_peak_bytes;
  s->kv_resident_bytes = g.kv_resident_bytes;
  s->memory_budget_kv_limit_blocks = g.limit_blocks;
  s->memory_budget_limited = g.limited_readings;
  s->memory_budget_overshoots = g.overshoots;
  s->kv_trimmed_bytes = g.trimmed_bytes;
  s->kv_low_watermark_bytes = guard.config().low_watermark_bytes;
}

}  // namespace hinge
