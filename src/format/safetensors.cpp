// safetensors reader and Hugging Face model folder. See safetensors.h for the layout.
#include "format/safetensors.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "format/error_text.h"
#include "format/mapped_file.h"

namespace hinge {

using nlohmann::json;

namespace {

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxRank = 8;
constexpr uint64_t kMaxJsonFileBytes = 256ull << 20;

struct DtypeInfo {
  std::string_view name;
  uint32_t bytes;
  std::optional<GgmlType> type;  // nullopt: known to safetensors, not supported by hinge
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", 4, GgmlType::F32}, {"F16", 2, GgmlType::F16},    {"BF16", 2, GgmlType::BF16},
    {"F64", 8, std::nullopt},  {"I64", 8, std::nullopt},     {"I32", 4, std::nullopt},
    {"I16", 2, std::nullopt},  {"I8", 1, std::nullopt},      {"U8", 1, std::nullopt},
    {"U16", 2, std::nullopt},  {"U32", 4, std::nullopt},     {"U64", 8, std::nullopt},
    {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Parses the header JSON, reporting a duplicate top-level key (nlohmann keeps the last one
// silently; the format forbids duplicates).
Status parse_header_json(const char* begin, const char* end, const std::string& path, json* out) {
  std::string duplicate;
  std::set<std::string> seen;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  try {
    *out = json::parse(begin, end, cb);
  } catch (const std::exception& e) {
    return Status::Errorf("{}: invalid safetensors header JSON: {}", path, e.what());
  }
  if (!duplicate.empty())
    return Status::Errorf("{}: safetensors header has duplicate entry '{}'", path, duplicate);
  return Status::Ok();
}

}  // namespace

uint64_t SafetensorsTensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated against overflow when parsed
  return n;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  HINGE_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path, "safetensors file"));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->size_ = m.size();
  f->base_ = m.release();
  f->owns_mapping_ = true;
  HINGE_RETURN_IF_ERROR(format_internal::one_line(f->parse()));
  return f;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::from_memory(const uint8_t* data,
                                                                        size_t size,
                                                                        std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  HINGE_RETURN_IF_ERROR(format_internal::one_line(f->parse()));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (owns_mapping_ && base_ != nullptr)
    ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

Status SafetensorsFile::parse() {
  if (size_ < 8) {
    return Status::Errorf(
        "{}: too small to be a safetensors file ({} bytes; the header length "
        "alone takes 8)",
        path_, size_);
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, base_, 8);
  if (header_len > size_ - 8) {
    return Status::Errorf(
        "{}: safetensors header length {} exceeds the file size {} (not a "
        "safetensors file, or truncated)",
        path_, header_len, size_);
  }
  if (header_len > kMaxHeaderBytes) {
    return Status::Errorf("{}: safetensors header length {} is above the 100 MB limit", path_,
                          header_len);
  }
  if (header_len < 2 || base_[8] != '{') {
    return Status::Errorf("{}: not a safetensors file (header does not start with a JSON object)",
                          path_);
  }
  data_offset_ = 8 + header_len;
  const uint64_t buf_size = size_ - data_offset_;
  const char* hb = reinterpret_cast<const char*>(base_ + 8);
  json header;
  HINGE_RETURN_IF_ERROR(parse_header_json(hb, hb + header_len, path_, &header));
  if (!header.is_object())
    return Status::Errorf("{}: safetensors header is not a JSON object", path_);

  for (auto item = header.begin(); item != header.end(); ++item) {
    // Not a structured binding: clang 14 cannot capture those in the lambda below.
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) return Status::Errorf("{}: __metadata__ is not a JSON object", path_);
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    auto bad = [&](std::string_view what) {
      return Status::Errorf("{}: tensor '{}': {}", path_, name, what);
    };
    if (name.empty()) return Status::Errorf("{}: tensor with an empty name", path_);
    if (!entry.is_object()) return bad("entry is not a JSON object");
    auto dt = entry.find("dtype");
    auto sh = entry.find("shape");
    auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) return bad("missing or non-string \"dtype\"");
    if (sh == entry.end() || !sh->is_array()) return bad("missing or non-array \"shape\"");
    if (off == entry.end() || !off->is_array() || off->size() != 2)
      return bad("\"data_offsets\" must be an array of two integers");

    SafetensorsTensor t;
    t.name = name;
    t.dtype = dt->get<std::string>();
    const DtypeInfo* info = find_dtype(t.dtype);
    if (!info) return bad(fmt::format("unknown dtype '{}'", t.dtype));
    if (!info->type) {
      return bad(fmt::format("unsupported dtype '{}' (supported: F32, F16, BF16)", t.dtype));
    }
    t.type = *info->type;
    if (sh->size() > kMaxRank)
      return bad(fmt::format("{} dimensions (at most {})", sh->size(), kMaxRank));
    uint64_t elems = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      uint64_t v = d.get<uint64_t>();
      t.shape.push_back(v);
      if (__builtin_mul_overflow(elems, v, &elems)) return bad("shape product overflows");
    }
    t.ne.assign(t.shape.rbegin(), t.shape.rend());
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(elems, uint64_t{info->bytes}, &bytes))
      return bad("byte size overflows");
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      return bad("data_offsets must be non-negative integers");
    const uint64_t begin = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (end < begin) return bad(fmt::format("data_offsets [{}, {}] end before begin", begin, end));
    if (end > buf_size) {
      return bad(
          fmt::format("data [offsets {}..{}] extends past end of file (data starts at {}, "
                      "file size {})",
                      begin, end, data_offset_, size_));
    }
    if (end - begin != bytes) {
      return bad(fmt::format("data_offsets [{}, {}] hold {} bytes but shape x {} needs {}", begin,
                             end, end - begin, t.dtype, bytes));
    }
    t.offset = begin;
    t.num_bytes = bytes;
    t.data = base_ + data_offset_ + begin;
    tensors_.push_back(std::move(t));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.num_bytes < b.num_bytes;
  });
  uint64_t prev_end = 0;
  const SafetensorsTensor* prev = nullptr;
  for (const auto& t : tensors_) {
    if (t.num_bytes == 0) continue;  // empty tensors occupy nothing
    if (prev && t.offset < prev_end) {
      return Status::Errorf("{}: tensor '{}' data [{}, {}) overlaps tensor '{}' [{}, {})", path_,
                            t.name, t.offset, t.offset + t.num_bytes, prev->name, prev->offset,
                            prev_end);
    }
    prev = &t;
    prev_end = t.offset + t.num_bytes;
  }
  for (size_t k = 0; k < tensors_.size(); ++k) index_.emplace(tensors_[k].name, k);
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<json> read_json_file(const std::string& path) {
  if (is_directory(path)) return Status::Errorf("{}: is a directory, not a JSON file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("{}: cannot open: {}", path, std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto len = in.tellg();
  if (len < 0 || static_cast<uint64_t>(len) > kMaxJsonFileBytes)
    return Status::Errorf("{}: JSON file too large or unreadable", path);
  in.seekg(0);
  std::string text(static_cast<size_t>(len), '\0');
  in.read(text.data(), len);
  if (!in) return Status::Errorf("{}: read failed", path);
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    return Status::Errorf("{}: invalid JSON: {}", path, e.what());
  }
}

StatusOr<std::unique_ptr<HfModelDir>> HfModelDir::open(const std::string& dir) {
  auto r = open_impl(dir);
  if (!r.ok()) return format_internal::one_line(r.status());
  return r;
}

StatusOr<std::unique_ptr<HfModelDir>> HfModelDir::open_impl(const std::string& dir) {
  if (!is_directory(dir)) {
    return Status::Errorf(
        "{}: not a directory (expected a Hugging Face model folder with "
        "config.json and model.safetensors)",
        dir);
  }
  std::unique_ptr<HfModelDir> m(new HfModelDir());
  m->dir_ = dir;
  const std::string config_path = dir + "/config.json";
  if (!is_regular_file(config_path)) return Status::Errorf("{}: missing config.json", dir);
  HINGE_ASSIGN_OR_RETURN(m->config_, read_json_file(config_path));
  if (!m->config_.is_object()) return Status::Errorf("{}: not a JSON object", config_path);

  const std::string index_path = dir + "/model.safetensors.index.json";
  // name -> shard file, from the index (empty for a single-file model)
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_files;
  if (is_regular_file(index_path)) {
    HINGE_ASSIGN_OR_RETURN(json index, read_json_file(index_path));
    auto wm = index.is_object() ? index.find("weight_map") : index.end();
    if (!index.is_object() || wm == index.end() || !wm->is_object())
      return Status::Errorf("{}: missing \"weight_map\" object", index_path);
    std::set<std::string> files;
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string())
        return Status::Errorf("{}: weight_map entry '{}' is not a string", index_path, name);
      const std::string f = file.get<std::string>();
      // Shards live next to the index: refuse paths that could point elsewhere.
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
        return Status::Errorf("{}: weight_map entry '{}' names an invalid shard file '{}'",
                              index_path, name, f);
      }
      weight_map[name] = f;
      files.insert(f);
    }
    if (files.empty()) return Status::Errorf("{}: weight_map is empty", index_path);
    shard_files.assign(files.begin(), files.end());
  } else if (is_regular_file(dir + "/model.safetensors")) {
    shard_files.push_back("model.safetensors");
  } else {
    return Status::Errorf("{}: no model.safetensors or model.safetensors.index.json", dir);
  }

  std::map<std::string, size_t> shard_of;  // tensor name -> shard index
  for (const std::string& file : shard_files) {
    HINGE_ASSIGN_OR_RETURN(auto shard, SafetensorsFile::open(dir + "/" + file));
    for (const auto& t : shard->tensors()) {
      auto [it, inserted] = m->index_.emplace(t.name, &t);
      if (!inserted) {
        return Status::Errorf("{}: tensor '{}' appears in both {} and {}", dir, t.name,
                              shard_files[shard_of[t.name]], file);
      }
      shard_of[t.name] = m->shards_.size();
    }
    m->shards_.push_back(std::move(shard));
  }
  for (const auto& [name, file] : weight_map) {
    auto it = shard_of.find(name);
    if (it == shard_of.end() || shard_files[it->second] != file) {
      return Status::Errorf(
          "{}: weight_map places tensor '{}' in {}, but that shard does not "
          "hold it",
          index_path, name, file);
    }
  }
  // safetensors' torch helper drops tied duplicates and records "dropped -> kept" in
  // __metadata__ (tinystories-656k: model.embed_tokens.weight -> lm_head.weight).
  for (const auto& shard : m->shards_) {
    for (const auto& [k, v] : shard->metadata()) {
      if (m->index_.count(k) || !m->index_.count(v)) continue;
      m->aliases_.emplace(k, v);
    }
  }
  if (is_regular_file(dir + "/tokenizer.json")) m->tokenizer_json_ = dir + "/tokenizer.json";
  if (is_regular_file(dir + "/tokenizer_config.json"))
    m->tokenizer_config_ = dir + "/tokenizer_config.json";
  return m;
}

const SafetensorsTensor* HfModelDir::find_tensor(std::string_view name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  auto al = aliases_.find(name);
  if (al == aliases_.end()) return nullptr;
  auto target = index_.find(al->second);
  return target == index_.end() ? nullptr : target->second;
}

std::vector<std::string> HfModelDir::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, t] : index_) names.push_back(name);
  return names;
}

std::optional<std::string> HfModelDir::find_file(std::string_view name) const {
  if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  std::string p = dir_ + "/" + std::string(name);
  if (!is_regular_file(p)) return std::nullopt;
  return p;
}

}  // namespace hinge
