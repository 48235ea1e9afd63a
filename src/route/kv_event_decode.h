// Decoding a KV event batch (the msgpack payload of cluster/kv_event_wire.h), positional or
// map-encoded, as `hinge route` subscribes to replicas. Strict where it matters to the index
// (types of hashes, token ids, block size) and hostile-input safe: anything else is an error,
// never a crash. Unknown event types are skipped (a newer publisher may add some).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge::route {

struct DecodedKvEvent {
  enum class Kind { kStored, kRemoved, kAllCleared };
  Kind kind = Kind::kStored;
  std::vector<int64_t> hashes;
  std::optional<int64_t> parent;
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
};

struct DecodedKvBatch {
  double ts = 0;
  std::vector<DecodedKvEvent> events;
};

StatusOr<DecodedKvBatch> decode_kv_event_batch(std::string_view payload);

}  // namespace hinge::route
