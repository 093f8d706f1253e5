// Token sequences for the transformer, generated deterministically from a seed: synthetic tasks
// (copy, reverse, sort, modular addition) of variable length with padding, or a user's text file
// read character by character. Each row is a next-token problem of `context` positions: inputs,
// targets, a padding mask (real input tokens) and a loss mask (targets that count in the loss).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/sim/data/batch.h"

namespace precsim {

// A transformer's task; "copy" | "reverse" | "sort" | "modadd" | "text" in a config.
enum class SeqTask : uint8_t { kCopy, kReverse, kSort, kModAdd, kText };
std::string_view to_string(SeqTask t);

struct SeqDataConfig {
  SeqTask kind = SeqTask::kCopy;
  int symbols = 10;           // synthetic tasks: tokens 0..symbols-1, then SEP and PAD
  int min_length = 2;         // synthetic tasks: items per problem (copy/reverse/sort: 2 length + 1 <= context + 1)
  int max_length = 8;
  int train_size = 2048;      // problems (text: windows)
  int heldout_size = 256;
  std::string text_path;      // text: any file; its distinct bytes are the vocabulary
};

struct SeqDataset {
  int vocab = 0, context = 0;
  std::vector<int32_t> tokens, targets;  // (N,T)
  std::vector<uint8_t> valid, loss_mask;  // (N,T)
  int train_rows = 0, heldout_rows = 0;  // rows [0, train) train, [train, train + heldout) held out
  std::vector<std::string> token_names;  // printable name of each token (text: the byte)
};

// Throws std::invalid_argument naming the bad value (unknown kind, lengths that do not fit the
// context, an unreadable or too short text file).
SeqDataset make_seq_dataset(const SeqDataConfig& c, int context, uint64_t seed);

// The sizes make_seq_dataset(c, context, seed) gives, with its checks and their messages, without
// making a row (a text file is read for its vocabulary). For any seed.
struct SeqDataShape {
  int vocab = 0, train_rows = 0, heldout_rows = 0;
};
SeqDataShape seq_data_shape(const SeqDataConfig& c, int context);

// A batch of rows (indices into the dataset's rows) copied into contiguous buffers.
struct SeqBatch {
  std::vector<int32_t> tokens, targets;
  std::vector<uint8_t> valid, loss_mask;
  TokenBatch view(int rows, int seq) const;
  // Targets that count in the loss: the denominator of the token-mean loss.
  int64_t counted() const;
};
void gather_rows(SeqBatch& out, const SeqDataset& d, const std::vector<int>& rows);


}  // namespace precsim
