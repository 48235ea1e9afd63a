// libFuzzer target: a KV event batch as `hinge route` receives it from a replica's ZeroMQ socket
// (route/kv_event_decode.h), then applied to a PrefixIndex as the router does. Network input:
// an error is fine, a crash, a hang or an index that contradicts itself is not.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "route/kv_event_decode.h"
#include "route/prefix_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto batch = hinge::route::decode_kv_event_batch(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!batch.ok()) {
    if (batch.status().message().empty()) __builtin_trap();
    return 0;
  }
  hinge::route::PrefixIndex index;
  std::vector<uint64_t> chain;
  std::set<int64_t> known;  // event hashes the index holds (a repeated one keeps its first content)
  for (const auto& e : batch->events) {
    using K = hinge::route::DecodedKvEvent::Kind;
    if (e.kind == K::kAllCleared) {
      index.clear();
      known.clear();
      if (index.blocks() != 0) __builtin_trap();
    } else if (e.kind == K::kRemoved) {
      index.block_removed(e.hashes);
      for (const int64_t h : e.hashes) known.erase(h);
    } else {
      if (e.block_size <= 0) __builtin_trap();  // the decoder refuses those
      const bool fresh = !e.hashes.empty() && !known.contains(e.hashes[0]);
      const bool ok = index.block_stored(e.hashes, e.parent, e.token_ids, e.block_size);
      if (ok) known.insert(e.hashes.begin(), e.hashes.end());
      if (ok && fresh && !e.parent) {
        // A chain's first block, newly stored: its content must match at least that block.
        hinge::route::content_chain(e.token_ids, e.block_size, &chain);
        if (index.matched_blocks(chain, 0) < 1) __builtin_trap();
      }
    }
  }
  return 0;
}
