#include "precsim/sim/model/layers.h"

#include <cmath>
#include <numbers>
#include <vector>

namespace precsim {

template <class T>
void bias_forward(T* out, const T* bias, int batch, int oc) {
  if (!bias) return;
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < oc; ++o) out[size_t(b) * oc + o] += bias[o];
}

template <class T>
void bias_backward(T* dbias, const T* dout, int batch, int oc) {
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < oc; ++o) dbias[o] += dout[size_t(b) * oc + o];
}

template <class T>
void relu_forward(T* out, const T* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = inp[i] > T(0) ? inp[i] : T(0);
}

template <class T>
void relu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) dinp[i] += inp[i] > T(0) ? dout[i] : T(0);
}

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
template <class T>
T tanh_once(T x) {
  return static_cast<T>(std::tanh(static_cast<double>(x)));
}
}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, size_t n, T* tanh_out) {
  const T s = T(kGeluScale), c = T(0.044715);
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T cube = c * x * x * x;
    const T t = tanh_once(s * (x + cube));
    if (tanh_out) tanh_out[i] = t;
    out[i] = T(0.5) * x * (T(1) + t);
  }
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, const T* tanh_in) {
  const T s = T(kGeluScale), c = T(0.044715);
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T t = tanh_in ? tanh_in[i] : tanh_once(s * (x + c * x * x * x));  // the forward's argument
    const T sech2 = T(1) - t * t;
    const T local = T(0.5) * (T(1) + t) + x * T(0.5) * sech2 * s * (T(1) + T(3) * c * x * x);
    dinp[i] += local * dout[i];
  }
}

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int batch, int c,
                       double eps) {
  for (int b = 0; b < batch; ++b) {
    const T* x = inp + size_t(b) * c;
    T m = 0;
    for (int i = 0; i < c; ++i) m += x[i];
    m = m / T(c);
    T v = 0;
    for (int i = 0; i < c; ++i) v += (x[i] - m) * (x[i] - m);
    v = v / T(c);
    const T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(v + T(eps))));
    T* o = out + size_t(b) * c;
    for (int i = 0; i < c; ++i) o[i] = (x[i] - m) * r * weight[i] + bias[i];
    mean[b] = m;
    rstd[b] = r;
  }
}

template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                        const T* rstd, int batch, int c) {
  for (int b = 0; b < batch; ++b) {
    const T* x = inp + size_t(b) * c;
    const T* dy = dout + size_t(b) * c;
    T* dx = dinp + size_t(b) * c;
    const T m = mean[b], r = rstd[b];
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int i = 0; i < c; ++i) {
      const T norm = (x[i] - m) * r;
      const T dnorm = weight[i] * dy[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = dnorm_mean / T(c);
    dnorm_norm_mean = dnorm_norm_mean / T(c);
    for (int i = 0; i < c; ++i) {
      const T norm = (x[i] - m) * r;
      const T dnorm = weight[i] * dy[i];
      dbias[i] += dy[i];
      dweight[i] += norm * dy[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
    }
  }
}

template <class T>
void batchnorm_stats(T* mean, T* var, const T* inp, int batch, int c) {
  for (int i = 0; i < c; ++i) {
    T m = 0;
    for (int b = 0; b < batch; ++b) m += inp[size_t(b) * c + i];
    m = m / T(batch);
    T v = 0;
    for (int b = 0; b < batch; ++b) v += (inp[size_t(b) * c + i] - m) * (inp[size_t(b) * c + i] - m);
    mean[i] = m;
    var[i] = v / T(batch);
  }
}

template <class T>
void batchnorm_normalize(T* out, T* rstd, const T* inp, const T* weight, const T* bias, const T* mean, const T* var,
                         int batch, int c, double eps) {
  for (int i = 0; i < c; ++i) {
    const T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var[i] + T(eps))));
    if (rstd) rstd[i] = r;
    for (int b = 0; b < batch; ++b) {
      const size_t k = size_t(b) * c + i;
      out[k] = (inp[k] - mean[i]) * r * weight[i] + bias[i];
    }
  }
}

template <class T>
void batchnorm_combine_stats(T* mean, T* var, const T* group_mean, const T* group_var, const int* counts, int groups,
                             int c) {
  for (int i = 0; i < c; ++i) {
    T n = T(counts[0]), m = group_mean[i], m2 = group_var[i] * T(counts[0]);
    for (int g = 1; g < groups; ++g) {
      const T nb = T(counts[g]), n_ab = n + nb, d = group_mean[size_t(g) * c + i] - m;
      m = m + d * nb / n_ab;
      m2 = m2 + group_var[size_t(g) * c + i] * nb + d * d * n * nb / n_ab;
      n = n_ab;
    }
    mean[i] = m;
    var[i] = m2 / n;
  }
}

template <class T>
void batchnorm_forward(T* out, T* mean, T* var, T* rstd, const T* inp, const T* weight, const T* bias, int batch,
                       int c, double eps) {
  batchnorm_stats(mean, var, inp, batch, c);
  batchnorm_normalize(out, rstd, inp, weight, bias, mean, var, batch, c, eps);
}

// The LayerNorm backward with rows and channels exchanged: the mean terms run over the batch.
template <class T>
void batchnorm_backward_sums(T* sum_dnorm, T* sum_dnorm_norm, const T* dout, const T* inp, const T* weight,
                             const T* mean, const T* rstd, int batch, int c) {
  for (int i = 0; i < c; ++i) {
    const T m = mean[i], r = rstd[i];
    T s = 0, sn = 0;
    for (int b = 0; b < batch; ++b) {
      const size_t k = size_t(b) * c + i;
      const T dnorm = weight[i] * dout[k];
      s += dnorm;
      sn += dnorm * ((inp[k] - m) * r);
    }
    sum_dnorm[i] = s;
    sum_dnorm_norm[i] = sn;
  }
}

template <class T>
void batchnorm_backward_apply(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                              const T* mean, const T* rstd, const T* sum_dnorm, const T* sum_dnorm_norm, int count,
                              int batch, int c) {
  for (int i = 0; i < c; ++i) {
    const T m = mean[i], r = rstd[i];
    const T dnorm_mean = sum_dnorm[i] / T(count), dnorm_norm_mean = sum_dnorm_norm[i] / T(count);
    for (int b = 0; b < batch; ++b) {
      const size_t k = size_t(b) * c + i;
      const T norm = (inp[k] - m) * r;
      const T dnorm = weight[i] * dout[k];
      dbias[i] += dout[k];
      dweight[i] += norm * dout[k];
      dinp[k] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
    }
  }
}

template <class T>
void batchnorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                        const T* rstd, int batch, int c) {
  std::vector<T> s(static_cast<size_t>(c)), sn(static_cast<size_t>(c));
  batchnorm_backward_sums(s.data(), sn.data(), dout, inp, weight, mean, rstd, batch, c);
  batchnorm_backward_apply(dinp, dweight, dbias, dout, inp, weight, mean, rstd, s.data(), sn.data(), batch, batch, c);
}

template <class T>
void batchnorm_inference(T* out, const T* inp, const T* weight, const T* bias, const T* mean, const T* var, int batch,
                         int c, double eps) {
  batchnorm_normalize(out, static_cast<T*>(nullptr), inp, weight, bias, mean, var, batch, c, eps);
}

template <class T>
void softmax_xent_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int batch, int v) {
  for (int b = 0; b < batch; ++b) {
    const T* z = logits + size_t(b) * v;
    T* p = probs + size_t(b) * v;
    T maxv = z[0];
    for (int i = 1; i < v; ++i) maxv = z[i] > maxv ? z[i] : maxv;
    T sum = 0;
    for (int i = 0; i < v; ++i) {
      p[i] = static_cast<T>(std::exp(static_cast<double>(z[i] - maxv)));
      sum += p[i];
    }
    for (int i = 0; i < v; ++i) p[i] = p[i] / sum;
    // log-sum-exp form: exact even when the target's probability underflows.
    losses[b] = static_cast<T>(std::log(static_cast<double>(sum))) - (z[targets[b]] - maxv);
  }
}

template <class T>
void softmax_xent_backward(T* dlogits, const T* probs, const int32_t* targets, T dloss, int batch, int v) {
  for (int b = 0; b < batch; ++b) {
    const T* p = probs + size_t(b) * v;
    T* d = dlogits + size_t(b) * v;
    for (int i = 0; i < v; ++i) d[i] += (p[i] - (i == targets[b] ? T(1) : T(0))) * dloss;
  }
}

template <class T>
void mse_forward(T* losses, const T* pred, const T* target, int batch, int v) {
  for (int b = 0; b < batch; ++b) {
    T s = 0;
    for (int i = 0; i < v; ++i) {
      const T e = pred[size_t(b) * v + i] - target[size_t(b) * v + i];
      s += e * e;
    }
    losses[b] = s / T(v);
  }
}

template <class T>
void mse_backward(T* dpred, const T* pred, const T* target, T dloss, int batch, int v) {
  const T k = T(2) / T(v);
  for (size_t i = 0; i < size_t(batch) * v; ++i) dpred[i] += k * (pred[i] - target[i]) * dloss;
}

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

#define PRECSIM_LAYERS(T)                                                                              \
  template void bias_forward<T>(T*, const T*, int, int);                                              \
  template void bias_backward<T>(T*, const T*, int, int);                                             \
  template void relu_forward<T>(T*, const T*, size_t);                                                \
  template void relu_backward<T>(T*, const T*, const T*, size_t);                                     \
  template void gelu_forward<T>(T*, const T*, size_t, T*);                                            \
  template void gelu_backward<T>(T*, const T*, const T*, size_t, const T*);                           \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, double);     \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int, int); \
  template void batchnorm_forward<T>(T*, T*, T*, T*, const T*, const T*, const T*, int, int, double);  \
  template void batchnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int, int); \
  template void batchnorm_inference<T>(T*, const T*, const T*, const T*, const T*, const T*, int, int, double); \
  template void batchnorm_stats<T>(T*, T*, const T*, int, int);                                        \
  template void batchnorm_normalize<T>(T*, T*, const T*, const T*, const T*, const T*, const T*, int, int, double); \
  template void batchnorm_combine_stats<T>(T*, T*, const T*, const T*, const int*, int, int);          \
  template void batchnorm_backward_sums<T>(T*, T*, const T*, const T*, const T*, const T*, const T*, int, int); \
  template void batchnorm_backward_apply<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                            const T*, int, int, int);                                  \
  template void softmax_xent_forward<T>(T*, T*, const T*, const int32_t*, int, int);                  \
  template void softmax_xent_backward<T>(T*, const T*, const int32_t*, T, int, int);                  \
  template void mse_forward<T>(T*, const T*, const T*, int, int);                                     \
  template void mse_backward<T>(T*, const T*, const T*, T, int, int);                                 \
  template void residual_forward<T>(T*, const T*, const T*, size_t);                                  \
  template void residual_backward<T>(T*, T*, const T*, size_t);
PRECSIM_LAYERS(float)
PRECSIM_LAYERS(double)

}  // namespace precsim
