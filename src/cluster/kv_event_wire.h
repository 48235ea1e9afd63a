// KV events on the wire, as vLLM publishes them (vllm/distributed/kv_events.py), so llm-d's
// precise prefix-cache scorer and NVIDIA Dynamo's KV router read hinge as they read vLLM.
// One ZeroMQ message per batch, three frames: topic, an 8-byte big-endian sequence number
// (0, 1, 2, ... per publisher), and the msgpack payload this file encodes.
//
// Positional (default; msgspec array_like structs with tag=True, the class name first):
//   batch  [ts, [event...], data_parallel_rank]                       always three elements
//   ["BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size, lora_id=nil,
//    medium, lora_name=nil]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
// Map (--kv-events-format map; vLLM's newer encoding): the same fields by name,
//   {"ts": .., "events": [..], "data_parallel_rank": 0}, each event {"type": "BlockStored", ..}.
// ts is seconds since the Unix epoch (float64); hashes are non-zero integers below 2^63
// (kv::external_block_hash); every field is always present (nil where vLLM has None).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kv/kv_events.h"

namespace hinge::cluster {

enum class KvEventFormat { kPositional, kMap };

StatusOr<KvEventFormat> parse_kv_event_format(std::string_view name);  // "positional" | "map"

struct KvEventWire {
  KvEventFormat format = KvEventFormat::kPositional;
  int32_t block_size = 16;
  // Where the blocks live, as vLLM's `medium`: hinge's prefix cache is in RAM ("CPU"; vLLM
  // says "GPU" for its device cache).
  std::string medium = "CPU";
  int32_t data_parallel_rank = 0;
};

// Appends the msgpack payload of one batch holding log's events to *out.
void encode_kv_event_batch(const kv::KvEventLog& log, double ts, const KvEventWire& wire,
                           std::string* out);

}  // namespace hinge::cluster
