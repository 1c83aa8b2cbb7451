// The linear-chain CRF's log-partition and its gradient on the CPU: the forward and backward algorithms over each
// sentence's own length, one sentence per task on ATen's threads (onlstm_tasks/native/crf.py is their face, onlstm_tasks/modules/crf/compiled.py their operator).
//
// Each step works in exponent space with a shift: with E[i][j] = exp(trans[i][j] - tmax) computed once,
//   alpha_t[j] = e_t[j] + m + tmax + log sum_i exp(alpha_{t-1}[i] - m) E[i][j],   m = max_i alpha_{t-1}[i]
// so a step costs K exponentials and K^2 multiply-adds (not K^2 exponentials), in double precision. The backward
// runs beta the same way and writes the marginals times the incoming gradient: dL/de_t[j] = g p_t(j),
// dL/dtrans[i][j] = g sum_t p_t(i, j), dL/dstart = g p_0, dL/dend = g p_{n-1}.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

using at::Tensor;

// E[i][j] = exp(trans[i][j] - tmax), returns tmax
double exp_transitions(const float* trans, int64_t K, std::vector<double>& E) {
  double tmax = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < K * K; ++i) tmax = std::max(tmax, static_cast<double>(trans[i]));
  if (!std::isfinite(tmax)) tmax = 0.0;
  E.resize(K * K);
  for (int64_t i = 0; i < K * K; ++i) E[i] = std::exp(static_cast<double>(trans[i]) - tmax);
  return tmax;
}

double max_of(const double* v, int64_t K) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < K; ++k) m = std::max(m, v[k]);
  return std::isfinite(m) ? m : 0.0;
}

void check(const Tensor& emissions, const Tensor& lengths, const Tensor& start, const Tensor& trans,
           const Tensor& end) {
  TORCH_CHECK(emissions.dim() == 3 && emissions.scalar_type() == at::kFloat && emissions.is_contiguous(),
              "crf: emissions must be a contiguous float32 [B, T, K] tensor");
  const int64_t K = emissions.size(2);
  TORCH_CHECK(lengths.scalar_type() == at::kLong && lengths.numel() == emissions.size(0), "crf: lengths [B] int64");
  TORCH_CHECK(start.numel() == K && end.numel() == K && trans.numel() == K * K && start.is_contiguous() &&
              end.is_contiguous() && trans.is_contiguous() && start.scalar_type() == at::kFloat &&
              trans.scalar_type() == at::kFloat && end.scalar_type() == at::kFloat,
              "crf: start [K], transitions [K, K], end [K], contiguous float32");
}

// returns (log Z [B] float32, log alpha [B, T, K] float64)
std::tuple<Tensor, Tensor> crf_forward(const Tensor& emissions, const Tensor& lengths, const Tensor& start,
                                       const Tensor& trans, const Tensor& end) {
  check(emissions, lengths, start, trans, end);
  const int64_t B = emissions.size(0), T = emissions.size(1), K = emissions.size(2);
  Tensor alpha = at::zeros({B, T, K}, emissions.options().dtype(at::kDouble));
  Tensor log_z = at::zeros({B}, emissions.options());
  std::vector<double> E;
  const double tmax = exp_transitions(trans.data_ptr<float>(), K, E);
  const float* e_all = emissions.data_ptr<float>();
  const float* st = start.data_ptr<float>();
  const float* en = end.data_ptr<float>();
  const int64_t* len = lengths.data_ptr<int64_t>();
  double* a_all = alpha.data_ptr<double>();
  float* z = log_z.data_ptr<float>();
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<double> p(K);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n = std::min(std::max<int64_t>(len[b], 1), T);
      const float* e = e_all + b * T * K;
      double* a = a_all + b * T * K;
      for (int64_t j = 0; j < K; ++j) a[j] = st[j] + e[j];
      for (int64_t t = 1; t < n; ++t) {
        const double* prev = a + (t - 1) * K;
        const double m = max_of(prev, K);
        for (int64_t i = 0; i < K; ++i) p[i] = std::exp(prev[i] - m);
        double* cur = a + t * K;
        for (int64_t j = 0; j < K; ++j) cur[j] = 0.0;
        for (int64_t i = 0; i < K; ++i) {
          const double pi = p[i];
          const double* row = E.data() + i * K;
          for (int64_t j = 0; j < K; ++j) cur[j] += pi * row[j];
        }
        for (int64_t j = 0; j < K; ++j) cur[j] = e[t * K + j] + m + tmax + std::log(cur[j]);
      }
      const double* last = a + (n - 1) * K;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < K; ++j) m = std::max(m, last[j] + en[j]);
      double s = 0.0;
      for (int64_t j = 0; j < K; ++j) s += std::exp(last[j] + en[j] - m);
      z[b] = static_cast<float>(m + std::log(s));
    }
  });
  return {log_z, alpha};
}

// the gradients of sum_b grad[b] log Z_b: (d emissions [B, T, K], d start [K], d transitions [K, K], d end [K])
std::tuple<Tensor, Tensor, Tensor, Tensor> crf_backward(const Tensor& grad, const Tensor& emissions,
                                                        const Tensor& lengths, const Tensor& start,
                                                        const Tensor& trans, const Tensor& end, const Tensor& alpha,
                                                        const Tensor& log_z) {
  check(emissions, lengths, start, trans, end);
  const int64_t B = emissions.size(0), T = emissions.size(1), K = emissions.size(2);
  Tensor g_c = grad.to(at::kDouble).contiguous();
  Tensor d_e = at::zeros_like(emissions);
  Tensor d_trans_b = at::zeros({B, K, K}, alpha.options());
  Tensor d_start_b = at::zeros({B, K}, alpha.options());
  Tensor d_end_b = at::zeros({B, K}, alpha.options());
  std::vector<double> E;
  const double tmax = exp_transitions(trans.data_ptr<float>(), K, E);
  const float* e_all = emissions.data_ptr<float>();
  const float* en = end.data_ptr<float>();
  const int64_t* len = lengths.data_ptr<int64_t>();
  const double* a_all = alpha.data_ptr<double>();
  const double* g_all = g_c.data_ptr<double>();
  Tensor log_z_d = log_z.to(at::kDouble).contiguous();
  const double* z_all = log_z_d.data_ptr<double>();
  float* de_all = d_e.data_ptr<float>();
  double* dt_all = d_trans_b.data_ptr<double>();
  double* ds_all = d_start_b.data_ptr<double>();
  double* dn_all = d_end_b.data_ptr<double>();
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<double> beta(T * K), q(K), p(K);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n = std::min(std::max<int64_t>(len[b], 1), T);
      const float* e = e_all + b * T * K;
      const double* a = a_all + b * T * K;
      const double g = g_all[b], z = z_all[b];
      double* bt = beta.data();
      for (int64_t i = 0; i < K; ++i) bt[(n - 1) * K + i] = en[i];
      for (int64_t t = n - 2; t >= 0; --t) {
        const double* next = bt + (t + 1) * K;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < K; ++j) m = std::max(m, e[(t + 1) * K + j] + next[j]);
        if (!std::isfinite(m)) m = 0.0;
        for (int64_t j = 0; j < K; ++j) q[j] = std::exp(e[(t + 1) * K + j] + next[j] - m);
        for (int64_t i = 0; i < K; ++i) {
          const double* row = E.data() + i * K;
          double s = 0.0;
          for (int64_t j = 0; j < K; ++j) s += row[j] * q[j];
          bt[t * K + i] = m + tmax + std::log(s);
        }
      }
      float* de = de_all + b * T * K;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < K; ++j) de[t * K + j] = static_cast<float>(g * std::exp(a[t * K + j] + bt[t * K + j] - z));
      for (int64_t j = 0; j < K; ++j) {
        ds_all[b * K + j] = de[j];
        dn_all[b * K + j] = de[(n - 1) * K + j];
      }
      double* dt = dt_all + b * K * K;
      for (int64_t t = 1; t < n; ++t) {  // p_t(i, j) = exp(a_{t-1}[i] + trans[i][j] + e_t[j] + beta_t[j] - log Z)
        const double* prev = a + (t - 1) * K;
        const double ma = max_of(prev, K);
        double mb = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < K; ++j) mb = std::max(mb, e[t * K + j] + bt[t * K + j]);
        if (!std::isfinite(mb)) mb = 0.0;
        for (int64_t i = 0; i < K; ++i) p[i] = std::exp(prev[i] - ma);
        const double scale = g * std::exp(ma + tmax + mb - z);
        for (int64_t j = 0; j < K; ++j) q[j] = scale * std::exp(e[t * K + j] + bt[t * K + j] - mb);
        for (int64_t i = 0; i < K; ++i) {
          const double pi = p[i];
          const double* row = E.data() + i * K;
          double* out = dt + i * K;
          for (int64_t j = 0; j < K; ++j) out[j] += pi * row[j] * q[j];
        }
      }
    }
  });
  return {d_e, d_start_b.sum(0).to(at::kFloat), d_trans_b.sum(0).to(at::kFloat), d_end_b.sum(0).to(at::kFloat)};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(onlstm_tasks, m) {
  m.def("cpu_crf_forward(Tensor emissions, Tensor lengths, Tensor start, Tensor transitions, Tensor end) "
        "-> (Tensor, Tensor)");
  m.def("cpu_crf_backward(Tensor grad, Tensor emissions, Tensor lengths, Tensor start, Tensor transitions, "
        "Tensor end, Tensor alpha, Tensor log_z) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(onlstm_tasks, CPU, m) {
  m.impl("cpu_crf_forward", &crf_forward);
  m.impl("cpu_crf_backward", &crf_backward);
}
