#include "precsim/sim/train/model_keys.h"

#include "precsim/sim/model/mlp_pass.h"
#include "precsim/sim/model/transformer.h"
#include "precsim/sim/train/sr_keys.h"

namespace precsim {
namespace {

class MlpKeys final : public ModelKeys {
 public:
  GemmIds gemm(const GemmCall& call, uint32_t&) const override {
    return {sr_keys::mlp_gemm(call.layer, call.pass, 0), sr_keys::mlp_gemm(call.layer, call.pass, 1),
            sr_keys::mlp_delayed_slot(call.layer, call.pass, 0)};
  }
  uint32_t round(const RoundAt& at, uint32_t&) const override {
    if (at.point == RoundPoint::kActivation || at.point == RoundPoint::kNormOut || at.point == RoundPoint::kScores)
      return sr_keys::mlp_forward(at.layer, static_cast<MlpForward>(at.slot));
    if (at.slot == uint32_t(MlpBackward::kLossGrad)) return sr_keys::kLossGrad;
    return sr_keys::mlp_backward(at.layer, static_cast<MlpBackward>(at.slot));
  }
  int part_layer(const RoundAt& at) const override {
    if (at.point == RoundPoint::kActivation || at.point == RoundPoint::kNormOut) return at.layer;
    // The MLP keys these with the layer above (mlp_pass.h): they belong to the layer below.
    switch (static_cast<MlpBackward>(at.slot)) {
      case MlpBackward::kActivationGrad:
      case MlpBackward::kNormInputGrad:
      case MlpBackward::kNormWeightGrad:
      case MlpBackward::kNormBiasGrad: return at.layer - 1;
      default: return at.layer;  // kLossGrad's layer (= layers) is the last layer's slot
    }
  }
};

class TransformerKeys final : public ModelKeys {
 public:
  GemmIds gemm(const GemmCall& call, uint32_t& count) const override {
    GemmIds ids;
    ids.a = count++;
    ids.b = count++;
    ids.delayed_slot = sr_keys::transformer_delayed_slot(call.layer, call.site, int(TfSite::kCount), call.pass, 0);
    return ids;
  }
  uint32_t round(const RoundAt&, uint32_t& count) const override { return count++; }
  bool attention_product(int site) const override {
    return site == int(TfSite::kScores) || site == int(TfSite::kAttnV);
  }
  bool has_attention() const override { return true; }
  int observed_sites() const override { return int(TfSite::kFcProj) + 1; }
  bool whole_weight_grads() const override { return true; }
};

}  // namespace

const ModelKeys& mlp_keys() {
  static const MlpKeys k;
  return k;
}

const ModelKeys& transformer_keys() {
  static const TransformerKeys k;
  return k;
}

}  // namespace precsim
