// llama2.c checkpoint and tokenizer readers. See llama2c.h for the layouts.
#include "format/llama2c.h"

#include <sys/mman.h>

#include <cstring>
#include <limits>

#include "format/mapped_file.h"

namespace hinge::llama2c {

namespace {

constexpr uint64_t kHeaderBytes = 7 * 4;
constexpr int32_t kAk42Magic = 0x616b3432;  // newer llama2.c export versions start with "ak42"

bool mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

uint64_t Tensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& path) {
  HINGE_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path, "llama2.c checkpoint"));
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  c->path_ = path;
  c->size_ = m.size();
  c->base_ = m.release();
  c->owns_mapping_ = true;
  HINGE_RETURN_IF_ERROR(c->parse());
  return c;
}

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::from_memory(const uint8_t* data, size_t size,
                                                              std::string name) {
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0)
    return Status::Errorf("{}: llama2.c checkpoint buffer is not 4-byte aligned", name);
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  c->path_ = std::move(name);
  c->base_ = data;
  c->size_ = size;
  HINGE_RETURN_IF_ERROR(c->parse());
  return c;
}

Checkpoint::~Checkpoint() {
  if (owns_mapping_ && base_ != nullptr)
    ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

Status Checkpoint::parse() {
  if (size_ < kHeaderBytes) {
    return Status::Errorf(
        "{}: too small to be a llama2.c checkpoint ({} bytes; the header "
        "takes {})",
        path_, size_, kHeaderBytes);
  }
  int32_t h[7];
  std::memcpy(h, base_, sizeof h);
  if (h[0] == kAk42Magic) {
    return Status::Errorf(
        "{}: llama2.c export version {} (\"ak42\" header) is not supported; "
        "export with the legacy format (version 0)",
        path_, h[1]);
  }
  Config& c = config_;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] == std::numeric_limits<int32_t>::min() ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.seq_len = h[6];
  const std::string shape = fmt::format(
      "dim {}, hidden_dim {}, n_layers {}, n_heads {}, "
      "n_kv_heads {}, vocab_size {}, seq_len {}",
      h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.vocab_size <= 0 || c.seq_len <= 0) {
    return Status::Errorf("{}: not a llama2.c checkpoint: header has a non-positive size ({})",
                          path_, shape);
  }
  if (c.dim % c.n_heads != 0 || c.head_size() % 2 != 0 || c.n_kv_heads > c.n_heads ||
      c.n_heads % c.n_kv_heads != 0) {
    return Status::Errorf(
        "{}: not a llama2.c checkpoint: inconsistent header ({}; need dim a "
        "multiple of n_heads, an even head size, n_heads a multiple of "
        "n_kv_heads)",
        path_, shape);
  }

  // Element counts of each array, in file order, with overflow checks.
  const uint64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, vocab = c.vocab_size;
  const uint64_t q_dim = static_cast<uint64_t>(c.n_heads) * c.head_size();
  const uint64_t kv_dim = c.kv_dim();
  const uint64_t freq = static_cast<uint64_t>(c.seq_len) * c.head_size() / 2;
  struct Part {
    const float** dst;
    uint64_t a, b, c;  // a * b * c elements
  };
  const Part parts[] = {
      {&weights_.token_embedding, vocab, dim, 1},
      {&weights_.rms_att, layers, dim, 1},
      {&weights_.wq, layers, q_dim, dim},
      {&weights_.wk, layers, kv_dim, dim},
      {&weights_.wv, layers, kv_dim, dim},
      {&weights_.wo, layers, dim, q_dim},
      {&weights_.rms_ffn, layers, dim, 1},
      {&weights_.w1, layers, hidden, dim},
      {&weights_.w2, layers, dim, hidden},
      {&weights_.w3, layers, hidden, dim},
      {&weights_.rms_final, dim, 1, 1},
      {nullptr, freq, 1, 1},  // freq_cis_real (unused: RoPE is computed)
      {nullptr, freq, 1, 1},  // freq_cis_imag
      {c.shared_classifier ? nullptr : &weights_.wcls, c.shared_classifier ? 0 : vocab, dim, 1},
  };
  uint64_t offsets[std::size(parts)];
  uint64_t pos = kHeaderBytes;
  bool ok = true;
  for (size_t k = 0; k < std::size(parts) && ok; ++k) {
    uint64_t n = 0;
    ok = mul(parts[k].a, parts[k].b, &n) && mul(n, parts[k].c, &n) && mul(n, 4, &n);
    offsets[k] = pos;
    ok = ok && !__builtin_add_overflow(pos, n, &pos);
  }
  if (!ok) return Status::Errorf("{}: llama2.c header sizes overflow ({})", path_, shape);
  if (pos != size_) {
    return Status::Errorf(
        "{}: file size {} does not match the llama2.c header ({}), which "
        "needs {} bytes{}",
        path_, size_, shape, pos, size_ < pos ? " (truncated?)" : "");
  }
  for (size_t k = 0; k < std::size(parts); ++k)
    if (parts[k].dst) *parts[k].dst = reinterpret_cast<const float*>(base_ + offsets[k]);
  if (c.shared_classifier) weights_.wcls = weights_.token_embedding;

  // ggml-order views under GGUF llama names.
  const Weights& w = weights_;
  auto add = [&](std::string name, std::vector<uint64_t> ne, const float* data) {
    index_.emplace(name, tensors_.size());
    tensors_.push_back(Tensor{std::move(name), std::move(ne), data});
  };
  add("token_embd.weight", {dim, vocab}, w.token_embedding);
  add("output_norm.weight", {dim}, w.rms_final);
  if (!c.shared_classifier) add("output.weight", {dim, vocab}, w.wcls);
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    add(p + "attn_norm.weight", {dim}, w.rms_att + l * dim);
    add(p + "attn_q.weight", {dim, q_dim}, w.wq + l * q_dim * dim);
    add(p + "attn_k.weight", {dim, kv_dim}, w.wk + l * kv_dim * dim);
    add(p + "attn_v.weight", {dim, kv_dim}, w.wv + l * kv_dim * dim);
    add(p + "attn_output.weight", {q_dim, dim}, w.wo + l * dim * q_dim);
    add(p + "ffn_norm.weight", {dim}, w.rms_ffn + l * dim);
    add(p + "ffn_gate.weight", {dim, hidden}, w.w1 + l * hidden * dim);
    add(p + "ffn_down.weight", {hidden, dim}, w.w2 + l * dim * hidden);
    add(p + "ffn_up.weight", {dim, hidden}, w.w3 + l * hidden * dim);
  }
  return Status::Ok();
}

const Tensor* Checkpoint::find_tensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<Vocab> read_tokenizer(const std::string& path, int32_t vocab_size) {
  HINGE_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path, "llama2.c tokenizer file"));
  return parse_tokenizer(m.data(), m.size(), vocab_size, path);
}

StatusOr<Vocab> parse_tokenizer(const uint8_t* data, size_t size, int32_t vocab_size,
                                const std::string& name) {
  if (vocab_size <= 0)
    return Status::Errorf("{}: invalid vocabulary size {} for a llama2.c tokenizer", name,
                          vocab_size);
  if (size < 4)
    return Status::Errorf("{}: too small to be a llama2.c tokenizer ({} bytes)", name, size);
  Vocab v;
  std::memcpy(&v.max_token_length, data, 4);
  if (v.max_token_length <= 0 || static_cast<uint64_t>(v.max_token_length) > size) {
    return Status::Errorf("{}: not a llama2.c tokenizer: max_token_length {} (file size {})", name,
                          v.max_token_length, size);
  }
  // Each token takes at least 8 bytes (score, length).
  if (static_cast<uint64_t>(vocab_size) > (size - 4) / 8) {
    return Status::Errorf(
        "{}: {} bytes cannot hold {} tokens (wrong vocabulary size, or "
        "truncated)",
        name, size, vocab_size);
  }
  v.pieces.reserve(vocab_size);
  v.scores.reserve(vocab_size);
  uint64_t pos = 4;
  for (int32_t k = 0; k < vocab_size; ++k) {
    if (size - pos < 8) {
      return Status::Errorf("{}: truncated at token {} of {} (offset {}, file size {})", name, k,
                            vocab_size, pos, size);
    }
    float score;
    int32_t len;
    std::memcpy(&score, data + pos, 4);
    std::memcpy(&len, data + pos + 4, 4);
    pos += 8;
    if (len < 0 || len > v.max_token_length) {
      return Status::Errorf("{}: token {} has length {} at offset {} (max_token_length is {})",
                            name, k, len, pos - 4, v.max_token_length);
    }
    if (static_cast<uint64_t>(len) > size - pos) {
      return Status::Errorf(
          "{}: truncated in token {} of {} ({} bytes at offset {}, file size "
          "{})",
          name, k, vocab_size, len, pos, size);
    }
    v.pieces.emplace_back(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(len));
    v.scores.push_back(score);
    pos += static_cast<uint64_t>(len);
  }
  if (pos != size) {
    return Status::Errorf("{}: {} bytes left after {} tokens (wrong vocabulary size?)", name,
                          size - pos, vocab_size);
  }
  return v;
}

}  // namespace hinge::llama2c
