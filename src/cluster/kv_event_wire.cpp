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

// One tagged event: vLLM's positional form [tag, field...] or the map form
// {"type": tag, name: field...}; key() names the next field in the map form only.
struct EventWriter {
  Packer& p;
  bool map;
  void begin(std::string_view tag, uint32_t num_fields) {
    if (map) {
      p.pack_map(num_fields + 1);
      pack_str(p, "type");
    } else {
      p.pack_array(num_fields + 1);
    }
    pack_str(p, tag);
  }
  Packer& key(std::string_view name) {
    if (map) pack_str(p, name);
    return p;
  }
};

void pack_event(Packer& p, const kv::KvEventLog& log, const kv::KvEvent& e, const KvEventWire& w) {
  EventWriter ev{p, w.format == KvEventFormat::kMap};
  switch (e.kind) {
    case kv::KvEventKind::kStored:
      ev.begin("BlockStored", 7);
      pack_ints(ev.key("block_hashes"), log.hashes(e));
      pack_parent(ev.key("parent_block_hash"), e.parent);
      pack_ints(ev.key("token_ids"), log.tokens(e));
      ev.key("block_size").pack(w.block_size);
      ev.key("lora_id").pack_nil();
      pack_str(ev.key("medium"), w.medium);
      ev.key("lora_name").pack_nil();
      return;
    case kv::KvEventKind::kRemoved:
      ev.begin("BlockRemoved", 2);
      pack_ints(ev.key("block_hashes"), log.hashes(e));
      pack_str(ev.key("medium"), w.medium);
      return;
    case kv::KvEventKind::kAllCleared:
      ev.begin("AllBlocksCleared", 0);
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
