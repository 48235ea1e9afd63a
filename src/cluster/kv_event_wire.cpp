#include "cluster/kv_event_wire.h"

#include <msgpack.hpp>

namespace hinge::cluster {

namespace {

// msgpack::packer's buffer: appends to a std::string.
struct StringBuffer {
  std::string* s;
  void write(const char* data, size_t size) { s->append(data, size); }
};
using Packer = msgpack::packer<StringBuffer>;

void pack_str(Packer& p, std::string_view v) {
  p.pack_str(static_cast<uint32_t>(v.size()));
  p.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
}

template <class Span>
void pack_ints(Packer& p, const Span& values) {
  p.pack_array(static_cast<uint32_t>(values.size()));
  for (const auto v : values) p.pack(v);
}

void pack_parent(Packer& p, uint64_t parent) {
  if (parent == 0)
    p.pack_nil();
  else
    p.pack(parent);
}

void pack_event(Packer& p, const kv::KvEventLog& log, const kv::KvEvent& e, const KvEventWire& w) {
  const bool map = w.format == KvEventFormat::kMap;
  switch (e.kind) {
    case kv::KvEventKind::kStored:
      if (map) {
        p.pack_map(8);
        pack_str(p, "type");
        pack_str(p, "BlockStored");
        pack_str(p, "block_hashes");
        pack_ints(p, log.hashes(e));
        pack_str(p, "parent_block_hash");
        pack_parent(p, e.parent);
        pack_str(p, "token_ids");
        pack_ints(p, log.tokens(e));
        pack_str(p, "block_size");
        p.pack(w.block_size);
        pack_str(p, "lora_id");
        p.pack_nil();
        pack_str(p, "medium");
        pack_str(p, w.medium);
        pack_str(p, "lora_name");
        p.pack_nil();
      } else {
        p.pack_array(8);
        pack_str(p, "BlockStored");
        pack_ints(p, log.hashes(e));
        pack_parent(p, e.parent);
        pack_ints(p, log.tokens(e));
        p.pack(w.block_size);
        p.pack_nil();
        pack_str(p, w.medium);
        p.pack_nil();
      }
      return;
    case kv::KvEventKind::kRemoved:
      if (map) {
        p.pack_map(3);
        pack_str(p, "type");
        pack_str(p, "BlockRemoved");
        pack_str(p, "block_hashes");
        pack_ints(p, log.hashes(e));
        pack_str(p, "medium");
        pack_str(p, w.medium);
      } else {
        p.pack_array(3);
        pack_str(p, "BlockRemoved");
        pack_ints(p, log.hashes(e));
        pack_str(p, w.medium);
      }
      return;
    case kv::KvEventKind::kAllCleared:
      if (map) {
        p.pack_map(1);
        pack_str(p, "type");
      } else {
        p.pack_array(1);
      }
      pack_str(p, "AllBlocksCleared");
      return;
  }
}

}  // namespace

StatusOr<KvEventFormat> parse_kv_event_format(std::string_view name) {
  if (name == "positional") return KvEventFormat::kPositional;
  if (name == "map") return KvEventFormat::kMap;
  return Status::Errorf("--kv-events-format: '{}' is not a format; use positional or map", name);
}

void encode_kv_event_batch(const kv::KvEventLog& log, double ts, const KvEventWire& wire,
                           std::string* out) {
  StringBuffer buf{out};
  Packer p(buf);
  const auto events = log.events();
  if (wire.format == KvEventFormat::kMap) {
    p.pack_map(3);
    pack_str(p, "ts");
    p.pack_double(ts);
    pack_str(p, "events");
  } else {
    p.pack_array(3);
    p.pack_double(ts);
  }
  p.pack_array(static_cast<uint32_t>(events.size()));
  for (const kv::KvEvent& e : events) pack_event(p, log, e, wire);
  if (wire.format == KvEventFormat::kMap) pack_str(p, "data_parallel_rank");
  p.pack(wire.data_parallel_rank);
}

}  // namespace hinge::cluster
