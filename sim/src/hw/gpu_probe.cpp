// Probe vectors and the inference of block-FMA parameters from their results. Every vector puts a
// few exact products at chosen slots; the rest of the vector is zero, and zero products are
// dropped by the model (reference section 2.1, step 1), so only the chosen slots matter.
#include "precsim/sim/hw/gpu_probe.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/rounding.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

double p2(int e) { return std::ldexp(1.0, e); }

// Operands a = m * 2^ea and b = 2^eb, both normal values of f, with a * b = m * 2^e.
std::pair<double, double> pair_for(const Format& f, int e, double m) {
  int ea = static_cast<int>(std::floor(e / 2.0));
  ea = std::clamp(ea, f.emin(), f.emax());
  int eb = e - ea;
  if (eb > f.emax()) eb = f.emax();
  if (eb < f.emin()) eb = f.emin();
  ea = e - eb;
  const double a = m * p2(ea), b = p2(eb);
  if (ea < f.emin() || ea > f.emax() || round_to(f, a) != a || round_to(f, b) != b)
    throw std::logic_error("probe: no operand pair of " + f.name + " makes " + std::to_string(m) + " * 2^" +
                           std::to_string(e));
  return {a, b};
}

class Prober {
 public:
  Prober(const ProbeTarget& t, const ProbeRunner& run) : t_(t), run_(run) {
    if (t.k < 4) throw std::invalid_argument("probe: vectors need at least 4 slots, got k=" + std::to_string(t.k));
    pmin_ = 2 * t.in.emin();
    pmax_ = 2 * t.in.emax();
    // Every value a vector produces stays a normal value of the output format: the big term B =
    // 2^eb and small terms down to 2^lo, at most kSpan binades apart.
    lo_ = std::max(pmin_, t.out.emin());
    const int hi = std::min(pmax_ - 2, t.out.emax() - 3);
    span_ = std::min(kSpan, hi - lo_);
    if (span_ < 8) throw std::invalid_argument("probe: " + t.in.name + " into " + t.out.name + " has too little range");
    eb_ = lo_ + span_;
  }

  ProbeResult run() {
    batch1();
    batch2();
    batch3();
    return r_;
  }

 private:
  static constexpr int kSpan = 40;

  ProbeVector zero() const {
    ProbeVector v;
    v.a.assign(t_.k, 0.0);
    v.b.assign(t_.k, 0.0);
    return v;
  }
  void put(ProbeVector& v, int slot, int e, double m = 1.0, bool negative = false) const {
    const auto [a, b] = pair_for(t_.in, e, m);
    v.a.at(slot) = negative ? -a : a;
    v.b.at(slot) = b;
  }

  struct Pending {
    std::string test;
    int param;
    double expected;
  };
  void add(ProbeVector v, std::string test, int param, double expected) {
    vecs_.push_back(std::move(v));
    pending_.push_back({std::move(test), param, expected});
  }
  // Runs the queued vectors and records every one in the evidence.
  std::vector<double> flush() {
    std::vector<double> d = run_(vecs_);
    if (d.size() != vecs_.size())
      throw std::runtime_error("probe runner returned " + std::to_string(d.size()) + " results for " +
                               std::to_string(vecs_.size()) + " vectors");
    for (size_t i = 0; i < vecs_.size(); ++i) {
      nlohmann::json terms = nlohmann::json::array();
      for (int s = 0; s < t_.k; ++s)
        if (vecs_[i].a[s] != 0) terms.push_back({s, hex_float(vecs_[i].a[s]), hex_float(vecs_[i].b[s])});
      r_.evidence.push_back({{"test", pending_[i].test},
                             {"param", pending_[i].param},
                             {"terms", terms},
                             {"c", hex_float(vecs_[i].c)},
                             {"d", hex_float(d[i])},
                             {"expected", hex_float(pending_[i].expected)}});
    }
    vecs_.clear();
    pending_.clear();
    return d;
  }

  // Batch 1: alignment bits F, result bits, subnormals; nothing here needs an earlier finding.
  void batch1() {
    const double big = p2(eb_);
    for (int t = 1; t <= span_; ++t) {  // B - B + 2^(eb-t): the small term survives iff t <= F
      ProbeVector v = zero();
      put(v, 0, eb_);
      put(v, 1, eb_, 1.0, true);
      put(v, 2, eb_ - t);
      add(v, "align_bits", t, p2(eb_ - t));
    }
    for (int t = 1; t <= span_; ++t) {  // B + 2^(eb-t): exact iff t <= min(F, result bits)
      ProbeVector v = zero();
      put(v, 0, eb_);
      put(v, 1, eb_ - t);
      add(v, "result_bits", t, big + p2(eb_ - t));
    }
    sub_in_ = -1;
    if (t_.in.subnormals && t_.in.has_zero) {
      const int es = t_.in.quantum_exp();
      const int eb2 = std::min(t_.in.emax(), std::max(0, t_.out.emin() + 1 - es));
      if (es + eb2 >= t_.out.emin()) {
        ProbeVector v = zero();
        v.a[0] = t_.in.min_subnormal();
        v.b[0] = p2(eb2);
        sub_in_ = static_cast<int>(vecs_.size());
        sub_in_value_ = p2(es + eb2);
        add(v, "input_subnormal", es, sub_in_value_);
      }
    }
    sub_out_ = -1;
    const int eo = t_.out.emin() - 3;
    if (t_.out.subnormals && (t_.has_c || eo >= pmin_)) {
      ProbeVector v = zero();
      if (t_.has_c) v.c = p2(eo);
      else put(v, 0, eo);
      sub_out_ = static_cast<int>(vecs_.size());
      add(v, "output_subnormal", eo, p2(eo));
    }
    const std::vector<double> d = flush();
    int f = 0;
    for (int t = 1; t <= span_ && d[t - 1] == p2(eb_ - t); ++t) f = t;
    r_.frac_bits = f;
    r_.frac_bits_at_least = f == span_;
    int o = 0;
    for (int t = 1; t <= span_ && d[span_ + t - 1] == big + p2(eb_ - t); ++t) o = t;
    r_.out_frac_bits = o;
    r_.out_frac_bits_limited = o >= f;
    auto kept = [&](int i, double expected) {
      if (i < 0) return std::string("n/a");
      return d[i] == expected ? std::string("kept") : d[i] == 0 ? std::string("flushed") : std::string("unknown");
    };
    r_.input_subnormals = kept(sub_in_, sub_in_value_);
    r_.output_subnormals = kept(sub_out_, p2(eo));
  }

  // Batch 2: alignment and result rounding, block size (need F and the result bits).
  void batch2() {
    const int f = r_.frac_bits, o = r_.out_frac_bits;
    const bool have_f = f > 0 && !r_.frac_bits_at_least;
    const double big = p2(eb_);
    int align_at = -1, out_at = -1, block_at = -1;
    if (have_f) {  // results 2^(eb-F) and 2^(eb-F+1) stay within the output range as F < span
      align_at = static_cast<int>(vecs_.size());
      for (bool neg : {false, true}) {  // B - B + 1.75 * 2^(eb-F): keeps 1 or 2 units of 2^(eb-F)
        ProbeVector v = zero();
        put(v, 0, eb_);
        put(v, 1, eb_, 1.0, true);
        put(v, 2, eb_ - f, 1.75, neg);
        add(v, neg ? "align_round_neg" : "align_round_pos", f, neg ? -p2(eb_ - f) : p2(eb_ - f));
      }
    }
    if (have_f && o > 0 && o + 1 <= f && o + 1 <= span_) {
      // Ties decide every mode with one bit below the result: B + u + u/2 (odd, so nearest-even
      // goes up), its negative, and B + u/2 (even, so only nearest-away and up go up).
      out_at = static_cast<int>(vecs_.size());
      for (int i = 0; i < 3; ++i) {
        ProbeVector v = zero();
        const bool neg = i == 1;
        put(v, 0, eb_, 1.0, neg);
        if (i < 2) put(v, 1, eb_ - o, 1.0, neg);
        put(v, 2, eb_ - o - 1, 1.0, neg);
        const double lo = i < 2 ? big + p2(eb_ - o) : big;
        add(v, i == 0 ? "result_round_pos" : i == 1 ? "result_round_neg" : "result_round_tie", o, neg ? -lo : lo);
      }
    }
    const int es = have_f ? eb_ - std::min(f + 3, span_) : 0;
    if (have_f && f + 1 <= span_) {
      block_at = static_cast<int>(vecs_.size());
      for (int j = 2; j < t_.k; ++j) {  // B, -B, then s at slot j: s is lost iff j shares their block
        ProbeVector v = zero();
        put(v, 0, eb_);
        put(v, 1, eb_, 1.0, true);
        put(v, j, es);
        add(v, "block_size", j, p2(es));
      }
    }
    if (vecs_.empty()) {
      r_.align_rounding = r_.out_rounding = "n/a";
      return;
    }
    const std::vector<double> d = flush();
    r_.align_rounding = "n/a";
    if (align_at >= 0) {
      const double one = p2(eb_ - f), two = p2(eb_ - f + 1);
      const double pos = d[align_at], neg = d[align_at + 1];
      if (pos == one && neg == -one) r_.align_rounding = "toward-zero";
      else if (pos == one && neg == -two) r_.align_rounding = "down";
      else if (pos == two && neg == -two) r_.align_rounding = "nearest";
      else r_.align_rounding = "unknown";
    }
    r_.out_rounding = "n/a";
    if (out_at >= 0) {
      const double u = p2(eb_ - o);
      const double pos = d[out_at], neg = d[out_at + 1], tie = d[out_at + 2];
      const bool pos_dn = pos == big + u, pos_up = pos == big + 2 * u;
      const bool neg_dn = neg == -big - u, neg_up = neg == -big - 2 * u;
      if (pos_dn && neg_dn) r_.out_rounding = "toward-zero";
      else if (pos_dn && neg_up) r_.out_rounding = "down";
      else if (pos_up && neg_dn) r_.out_rounding = "up";
      else if (pos_up && neg_up) r_.out_rounding = tie == big ? "nearest-even" : tie == big + u ? "nearest-away" : "unknown";
      else r_.out_rounding = "unknown";
    }
    if (block_at >= 0) {
      r_.block_pattern.clear();
      for (int j = 2; j < t_.k; ++j) {
        const double x = d[block_at + j - 2];
        r_.block_pattern += x == 0 ? '.' : x == p2(es) ? '|' : '?';
      }
      const size_t first = r_.block_pattern.find('|');
      r_.block_size = first == std::string::npos ? t_.k : static_cast<int>(first) + 2;
      r_.block_size_at_least = first == std::string::npos;
    }
  }

  // Batch 3: monotonicity and promotion to a wider sum (need F and n).
  void batch3() {
    r_.monotonic = "n/a";
    const int f = r_.frac_bits, n = r_.block_size;
    const bool have = f > 0 && !r_.frac_bits_at_least && n > 0;
    if (!have) return;
    int mono_at = -1, promo_at = -1;
    const int s = std::max({0, pmin_ + f, t_.out.emin() + f});
    const int m = std::min(n, t_.k);
    if (t_.has_c && s + 1 <= t_.out.emax() && s - f <= pmax_) {
      // c just below 2^(s+1), then c = 2^(s+1), plus m products of 1.5 * 2^(s-F): the larger c
      // moves the alignment point up one binade and every product is truncated away.
      mono_at = static_cast<int>(vecs_.size());
      for (int i = 0; i < 2; ++i) {
        ProbeVector v = zero();
        v.c = i == 0 ? p2(s + 1) - p2(s - t_.out.man_bits) : p2(s + 1);
        for (int j = 0; j < m; ++j) put(v, j, s - f, 1.5);
        add(v, i == 0 ? "monotonic_below" : "monotonic_above", m, v.c);
      }
    }
    const int t = f + 4;
    if (t <= t_.out.man_bits && t <= span_ && n < t_.k) {
      // B at slot 0 and 2^(eb-F-4) at the start of a later block: absorbed by an accumulator of F
      // fraction bits, kept once the partial sum has been promoted into a wider one.
      promo_at = static_cast<int>(vecs_.size());
      for (int j = n; j < t_.k; j += n) {
        ProbeVector v = zero();
        put(v, 0, eb_);
        put(v, j, eb_ - t);
        add(v, "promotion", j, p2(eb_) + p2(eb_ - t));
      }
    }
    if (vecs_.empty()) return;
    const std::vector<double> d = flush();
    if (mono_at >= 0) r_.monotonic = d[mono_at] > d[mono_at + 1] ? "no" : "not-shown";
    if (promo_at >= 0) {
      r_.promotion_pattern.clear();
      int idx = promo_at;
      for (int j = n; j < t_.k; j += n, ++idx)
        r_.promotion_pattern += d[idx] == p2(eb_) ? '.' : d[idx] == p2(eb_) + p2(eb_ - t) ? '|' : '?';
      const size_t first = r_.promotion_pattern.find('|');
      r_.promotion_interval = first == std::string::npos ? 0 : static_cast<int>(first + 1) * n;
    }
  }

  const ProbeTarget& t_;
  const ProbeRunner& run_;
  int pmin_ = 0, pmax_ = 0, lo_ = 0, span_ = 0, eb_ = 0;
  int sub_in_ = -1, sub_out_ = -1;
  double sub_in_value_ = 0;
  std::vector<ProbeVector> vecs_;
  std::vector<Pending> pending_;
  ProbeResult r_;
};

}  // namespace

ProbeResult run_probes(const ProbeTarget& target, const ProbeRunner& run) { return Prober(target, run).run(); }

AccumModel model_from_probe(const ProbeTarget& target, const ProbeResult& r, const std::string& source) {
  if (r.frac_bits <= 0 || r.block_size <= 0)
    throw std::runtime_error("probe of " + target.name + " did not determine F and n; no model can be built");
  AccumModel m = parse_accum_model("block");
  m.name = "probed-" + target.name;
  m.acc = target.out;
  m.block.block_size = r.block_size;
  m.block.frac_bits = r.frac_bits;
  m.block.out_frac_bits = std::min(r.out_frac_bits, target.out.man_bits);
  const bool nearest = r.out_rounding == "nearest-even";
  const bool assumed = r.out_rounding == "n/a" || r.out_rounding == "unknown";
  // Where the result cannot be rounded visibly (it keeps no more bits than the sum), the
  // published convention stands: FP32 results truncated, FP16 results rounded to nearest-even.
  m.block.final_rounding = nearest || (assumed && target.out.man_bits == 10) ? Rounding::kNearestEven
                                                                              : Rounding::kTowardZero;
  m.block.in_subnormals = r.input_subnormals != "flushed";
  m.block.out_subnormals = r.output_subnormals != "flushed";
  m.promote_every = std::max(0, r.promotion_interval);
  m.source = source;
  m.calibrated = true;
  m.description = "measured by precsim gpu probe (" + target.name + "): n=" + std::to_string(r.block_size) +
                  (r.block_size_at_least ? " or more" : "") + ", F=" + std::to_string(r.frac_bits) +
                  ", alignment " + r.align_rounding + ", result " + r.out_rounding +
                  (assumed ? " (final rounding assumed from the output format)" : "");
  return m;
}

nlohmann::json to_json(const ProbeResult& r) {
  return {{"frac_bits", r.frac_bits},
          {"frac_bits_at_least", r.frac_bits_at_least},
          {"align_rounding", r.align_rounding},
          {"out_frac_bits", r.out_frac_bits},
          {"out_frac_bits_limited_by_frac_bits", r.out_frac_bits_limited},
          {"out_rounding", r.out_rounding},
          {"block_size", r.block_size},
          {"block_size_at_least", r.block_size_at_least},
          {"block_pattern", r.block_pattern},
          {"input_subnormals", r.input_subnormals},
          {"output_subnormals", r.output_subnormals},
          {"monotonic", r.monotonic},
          {"promotion_interval", r.promotion_interval},
          {"promotion_pattern", r.promotion_pattern},
          {"evidence", r.evidence}};
}

}  // namespace precsim
