#include "precsim/sim/data/seq_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <nlohmann/json.hpp>

#include "precsim/formats/name_table.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/data/data_json.h"

namespace precsim {
namespace {

enum Stream : uint64_t { kLength = 301, kItems, kWindow };

int keyed_int(uint64_t seed, uint64_t stream, uint64_t index, int lo, int hi) {
  return lo + std::min(hi - lo, int(std::floor(uniform01(seed, stream, index) * (hi - lo + 1))));
}

// Writes one problem `seq` (tokens, answer starting at `answer`) as a padded next-token row.
void put_row(SeqDataset& d, int row, const std::vector<int32_t>& seq, size_t answer, int pad) {
  const int T = d.context;
  for (int t = 0; t < T; ++t) {
    const size_t at = size_t(row) * T + t;
    const bool real = size_t(t) + 1 < seq.size();
    d.tokens[at] = real ? seq[t] : pad;
    d.targets[at] = real ? seq[t + 1] : pad;
    d.valid[at] = real;
    d.loss_mask[at] = real && size_t(t) + 1 >= answer;
  }
}

// A synthetic task's longest problem must fit the context.
void check_fits_context(const SeqDataConfig& c, int context) {
  const int needed = c.kind == SeqTask::kModAdd ? c.max_length + 1 : 2 * c.max_length;
  if (needed > context)
    throw std::invalid_argument(fmt::format("data.max_length {} needs a context of {} positions for data.kind {}; model.context is {}",
                                            c.max_length, needed, to_string(c.kind), context));
}

void synthetic(SeqDataset& d, const SeqDataConfig& c, uint64_t seed) {
  const int sep = c.symbols, pad = c.symbols + 1;
  d.vocab = c.symbols + 2;
  const bool modadd = c.kind == SeqTask::kModAdd;
  check_fits_context(c, d.context);
  std::vector<int32_t> seq, items;
  for (int r = 0; r < d.train_rows + d.heldout_rows; ++r) {
    const int n = keyed_int(seed, kLength, uint64_t(r), c.min_length, c.max_length);
    items.resize(n);
    for (int i = 0; i < n; ++i) items[i] = keyed_int(seed, kItems, uint64_t(r) * 4096 + i, 0, c.symbols - 1);
    seq = items;
    seq.push_back(sep);
    const size_t answer = seq.size();
    if (modadd) {
      int64_t s = 0;
      for (int v : items) s += v;
      seq.push_back(int32_t(s % c.symbols));
    } else {
      std::vector<int32_t> out = items;
      if (c.kind == SeqTask::kReverse) std::reverse(out.begin(), out.end());
      if (c.kind == SeqTask::kSort) std::sort(out.begin(), out.end());
      seq.insert(seq.end(), out.begin(), out.end());
    }
    put_row(d, r, seq, answer, pad);
  }
  for (int i = 0; i < c.symbols; ++i) d.token_names.push_back(std::to_string(i));
  d.token_names.push_back("SEP");
  d.token_names.push_back("PAD");
}

// A text file's bytes and its vocabulary: its distinct bytes in byte order.
struct TextCorpus {
  std::string s;
  std::array<int, 256> id{};
  std::vector<std::string> token_names;
};

TextCorpus read_text(const SeqDataConfig& c, int context) {
  std::ifstream in(c.text_path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("data.text_path '{}': cannot open the file", c.text_path));
  std::stringstream ss;
  ss << in.rdbuf();
  TextCorpus t;
  t.s = ss.str();
  const std::string& s = t.s;
  t.id.fill(-1);
  for (unsigned char ch : s) t.id[ch] = 0;
  for (int b = 0, next = 0; b < 256; ++b)
    if (t.id[b] == 0) {
      t.id[b] = next++;
      t.token_names.push_back(std::string(1, char(b)));
    }
  // The trailing tenth is held out; each part must hold one window of context + 1 characters.
  const size_t T = size_t(context);
  if (s.size() / 10 < T + 1)
    throw std::invalid_argument(fmt::format("data.text_path '{}': {} bytes; its held-out tenth must hold context + 1 = {} "
                                            "characters, so the file needs at least {} bytes",
                                            c.text_path, s.size(), T + 1, 10 * (T + 1)));
  if (t.token_names.size() < 2)
    throw std::invalid_argument(fmt::format("data.text_path '{}': needs at least 2 distinct characters", c.text_path));
  return t;
}

void text(SeqDataset& d, const SeqDataConfig& c, uint64_t seed) {
  TextCorpus corpus = read_text(c, d.context);
  const std::string& s = corpus.s;
  const std::array<int, 256>& id = corpus.id;
  d.token_names = std::move(corpus.token_names);
  d.vocab = int(d.token_names.size());
  const size_t split = s.size() - s.size() / 10, T = size_t(d.context);
  std::vector<int32_t> seq(T + 1);
  for (int r = 0; r < d.train_rows + d.heldout_rows; ++r) {
    const bool held = r >= d.train_rows;
    const size_t lo = held ? split : 0, hi = (held ? s.size() : split) - (T + 1);
    const size_t off = lo + size_t(std::floor(uniform01(seed, kWindow, uint64_t(r)) * double(hi - lo + 1)));
    for (size_t t = 0; t <= T; ++t) seq[t] = id[static_cast<unsigned char>(s[std::min(off + t, s.size() - 1)])];
    put_row(d, r, seq, 1, 0);
  }
}

// The checks of the configuration that need neither the context nor a file.
void check_seq_config(const SeqDataConfig& c) {
  if (c.train_size < 1 || c.heldout_size < 1)
    throw std::invalid_argument(fmt::format("data.train_size {} and data.heldout_size {} must be >= 1", c.train_size, c.heldout_size));
  if (c.kind != SeqTask::kText) {
    if (c.symbols < 2 || c.symbols > 1000) throw std::invalid_argument(fmt::format("data.symbols {} is out of range; allowed: 2..1000", c.symbols));
    if (c.min_length < 1 || c.max_length < c.min_length)
      throw std::invalid_argument(fmt::format("data.min_length {} and data.max_length {} need 1 <= min_length <= max_length",
                                              c.min_length, c.max_length));
  } else if (c.text_path.empty()) {
    throw std::invalid_argument("data.kind text needs data.text_path (or --text FILE)");
  }
}

}  // namespace

SeqDataShape seq_data_shape(const SeqDataConfig& c, int context) {
  check_seq_config(c);
  SeqDataShape sh;
  sh.train_rows = c.train_size;
  sh.heldout_rows = c.heldout_size;
  if (c.kind == SeqTask::kText) {
    sh.vocab = int(read_text(c, context).token_names.size());
  } else {
    check_fits_context(c, context);
    sh.vocab = c.symbols + 2;
  }
  return sh;
}

SeqDataset make_seq_dataset(const SeqDataConfig& c, int context, uint64_t seed) {
  check_seq_config(c);
  SeqDataset d;
  d.context = context;
  d.train_rows = c.train_size;
  d.heldout_rows = c.heldout_size;
  const size_t n = size_t(c.train_size + c.heldout_size) * context;
  d.tokens.resize(n);
  d.targets.resize(n);
  d.valid.resize(n);
  d.loss_mask.resize(n);
  if (c.kind == SeqTask::kText) text(d, c, seed);
  else synthetic(d, c, seed);
  return d;
}

TokenBatch SeqBatch::view(int rows, int seq) const {
  return TokenBatch{tokens.data(), targets.data(), valid.data(), loss_mask.data(), rows, seq};
}

int64_t SeqBatch::counted() const {
  int64_t n = 0;
  for (uint8_t m : loss_mask) n += m;
  return n;
}

void gather_rows(SeqBatch& out, const SeqDataset& d, const std::vector<int>& rows) {
  const size_t T = size_t(d.context);
  for (auto* v : {&out.tokens, &out.targets}) v->resize(rows.size() * T);
  for (auto* v : {&out.valid, &out.loss_mask}) v->resize(rows.size() * T);
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t src = size_t(rows[i]) * T;
    std::copy_n(d.tokens.begin() + src, T, out.tokens.begin() + i * T);
    std::copy_n(d.targets.begin() + src, T, out.targets.begin() + i * T);
    std::copy_n(d.valid.begin() + src, T, out.valid.begin() + i * T);
    std::copy_n(d.loss_mask.begin() + src, T, out.loss_mask.begin() + i * T);
  }
}

constexpr auto kSeqTasks = name_table<SeqTask>({{SeqTask::kCopy, "copy"},
                                                {SeqTask::kReverse, "reverse"},
                                                {SeqTask::kSort, "sort"},
                                                {SeqTask::kModAdd, "modadd"},
                                                {SeqTask::kText, "text"}});

std::string_view to_string(SeqTask t) { return kSeqTasks.name(t); }
void to_json(nlohmann::json& j, SeqTask t) { j = to_string(t); }
// A transformer config's data.kind: its tasks only (an MLP's kinds are another config's).
void from_json(const nlohmann::json& j, SeqTask& t) { t = kSeqTasks.parse(j.get<std::string>(), "transformer data.kind"); }

// One key list serves both directions, as for the tabular DataConfig.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SeqDataConfig, kind, symbols, min_length, max_length, train_size, heldout_size,
                                   text_path)

nlohmann::json seq_data_config_to_json(const SeqDataConfig& c) { return c; }

SeqDataConfig seq_data_config_from_json(const nlohmann::json& j) {
  return merge_config(seq_data_config_to_json(SeqDataConfig{}), j, "data").get<SeqDataConfig>();
}

}  // namespace precsim
