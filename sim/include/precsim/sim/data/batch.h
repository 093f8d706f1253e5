// Views of one batch as a trainer reads it: rows of features with labels or targets (the MLP), or
// token sequences with their padding and loss masks (the transformer). A view owns nothing.
#pragma once

#include <cstdint>

namespace precsim {

struct BatchView {
  const double* x = nullptr;        // (rows, features)
  const int32_t* labels = nullptr;  // classification
  const double* targets = nullptr;  // regression (rows, outputs)
  int rows = 0;
  const double* items = nullptr;    // (rows) items of each row, 0: masked; null: one each
};

// The gradient of the sum over counted tokens of their cross-entropy times dloss: losses of tokens
// with loss_mask 0 are computed but carry no gradient.
struct TokenBatch {
  const int32_t* tokens = nullptr;     // (B,T) inputs
  const int32_t* targets = nullptr;    // (B,T) next tokens
  const uint8_t* valid = nullptr;      // (B,T) 1 where the input is a real token (padding mask)
  const uint8_t* loss_mask = nullptr;  // (B,T) 1 where the target counts in the loss
  int batch = 0, seq = 0;
};

}  // namespace precsim
