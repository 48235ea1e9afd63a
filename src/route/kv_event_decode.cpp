#include "route/kv_event_decode.h"

#include <msgpack.hpp>

namespace hinge::route {

namespace {

using msgpack::object;
namespace T = msgpack::type;

bool as_int(const object& o, int64_t* v) {
  if (o.type == T::POSITIVE_INTEGER) {
    *v = static_cast<int64_t>(o.via.u64);  // a hash above 2^63 keeps its 64 bits
    return true;
  }
  if (o.type == T::NEGATIVE_INTEGER) {
    *v = o.via.i64;
    return true;
  }
  return false;
}

bool as_str(const object& o, std::string_view* s) {
  if (o.type != T::STR) return false;
  *s = std::string_view(o.via.str.ptr, o.via.str.size);
  return true;
}

Status int_list(const object& o, const char* field, std::vector<int64_t>* out) {
  if (o.type != T::ARRAY) return Status::Errorf("{}: not an array", field);
  out->reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    int64_t v = 0;
    if (!as_int(o.via.array.ptr[i], &v)) return Status::Errorf("{}[{}]: not an integer", field, i);
    out->push_back(v);
  }
  return Status::Ok();
}

// The fields of one event, by name, from either encoding.
struct Fields {
  std::string_view type;
  const object* block_hashes = nullptr;
  const object* parent = nullptr;
  const object* token_ids = nullptr;
  const object* block_size = nullptr;
};

StatusOr<Fields> fields_of(const object& e) {
  Fields f;
  if (e.type == T::ARRAY) {  // [tag, ...] in vLLM's field order
    const uint32_t n = e.via.array.size;
    if (n == 0 || !as_str(e.via.array.ptr[0], &f.type)) return Status::Error("event: no type tag");
    const object* a = e.via.array.ptr;
    if (f.type == "BlockStored") {
      if (n < 5) return Status::Error("BlockStored: too few fields");
      f.block_hashes = &a[1];
      f.parent = &a[2];
      f.token_ids = &a[3];
      f.block_size = &a[4];
    } else if (f.type == "BlockRemoved") {
      if (n < 2) return Status::Error("BlockRemoved: too few fields");
      f.block_hashes = &a[1];
    }
    return f;
  }
  if (e.type != T::MAP) return Status::Error("event: neither an array nor a map");
  for (uint32_t i = 0; i < e.via.map.size; ++i) {
    std::string_view k;
    if (!as_str(e.via.map.ptr[i].key, &k)) continue;
    const object* v = &e.via.map.ptr[i].val;
    if (k == "type") {
      if (!as_str(*v, &f.type)) return Status::Error("event: type is not a string");
    } else if (k == "block_hashes") {
      f.block_hashes = v;
    } else if (k == "parent_block_hash") {
      f.parent = v;
    } else if (k == "token_ids") {
      f.token_ids = v;
    } else if (k == "block_size") {
      f.block_size = v;
    }
  }
  if (f.type.empty()) return Status::Error("event: no type");
  return f;
}

Status decode_event(const object& e, DecodedKvBatch* batch) {
  HINGE_ASSIGN_OR_RETURN(const Fields f, fields_of(e));
  DecodedKvEvent ev;
  if (f.type == "AllBlocksCleared") {
    ev.kind = DecodedKvEvent::Kind::kAllCleared;
  } else if (f.type == "BlockRemoved") {
    ev.kind = DecodedKvEvent::Kind::kRemoved;
    if (!f.block_hashes) return Status::Error("BlockRemoved: no block_hashes");
    HINGE_RETURN_IF_ERROR(int_list(*f.block_hashes, "block_hashes", &ev.hashes));
  } else if (f.type == "BlockStored") {
    ev.kind = DecodedKvEvent::Kind::kStored;
    if (!f.block_hashes || !f.token_ids || !f.block_size)
      return Status::Error("BlockStored: a field is missing");
    HINGE_RETURN_IF_ERROR(int_list(*f.block_hashes, "block_hashes", &ev.hashes));
    std::vector<int64_t> ids;
    HINGE_RETURN_IF_ERROR(int_list(*f.token_ids, "token_ids", &ids));
    ev.token_ids.reserve(ids.size());
    for (const int64_t t : ids) {
      if (t < 0 || t > INT32_MAX) return Status::Error("token_ids: out of range");
      ev.token_ids.push_back(static_cast<int32_t>(t));
    }
    int64_t bs = 0;
    if (!as_int(*f.block_size, &bs) || bs <= 0 || bs > (1 << 20))
      return Status::Error("block_size: not a positive integer");
    ev.block_size = static_cast<int32_t>(bs);
    if (f.parent && f.parent->type != T::NIL) {
      int64_t p = 0;
      if (!as_int(*f.parent, &p)) return Status::Error("parent_block_hash: not an integer");
      ev.parent = p;
    }
  } else {
    return Status::Ok();  // an event type this router does not use
  }
  batch->events.push_back(std::move(ev));
  return Status::Ok();
}

}  // namespace

StatusOr<DecodedKvBatch> decode_kv_event_batch(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    // Bounds against a hostile payload: counts, string sizes, nesting.
    const msgpack::unpack_limit limit(1u << 24, 1u << 12, 1u << 16, 1u << 16, 1u << 16, 16);
    oh = msgpack::unpack(payload.data(), payload.size(), nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    return Status::Errorf("not a msgpack event batch: {}", e.what());
  }
  const object& root = oh.get();
  const object* events = nullptr;
  DecodedKvBatch batch;
  if (root.type == T::ARRAY) {
    if (root.via.array.size != 3) return Status::Error("a batch has three elements");
    events = &root.via.array.ptr[1];
    const object& ts = root.via.array.ptr[0];
    if (ts.type == T::FLOAT64 || ts.type == T::FLOAT32) batch.ts = ts.via.f64;
  } else if (root.type == T::MAP) {
    for (uint32_t i = 0; i < root.via.map.size; ++i) {
      std::string_view k;
      if (!as_str(root.via.map.ptr[i].key, &k)) continue;
      if (k == "events") events = &root.via.map.ptr[i].val;
      if (k == "ts" && (root.via.map.ptr[i].val.type == T::FLOAT64 ||
                        root.via.map.ptr[i].val.type == T::FLOAT32))
        batch.ts = root.via.map.ptr[i].val.via.f64;
    }
  }
  if (!events || events->type != T::ARRAY) return Status::Error("a batch without an event list");
  for (uint32_t i = 0; i < events->via.array.size; ++i)
    HINGE_RETURN_IF_ERROR(decode_event(events->via.array.ptr[i], &batch));
  return batch;
}

}  // namespace hinge::route
