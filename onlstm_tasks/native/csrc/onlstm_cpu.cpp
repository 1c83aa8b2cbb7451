// The ON-LSTM layer's time loop on the CPU, forward and backward, as PyTorch operators (float32).
//
// Built by `pip install --no-build-isolation` as a PyTorch C++ extension (setup.py; optional: without a compiler,
// or without torch at build time, the encoders run the plain-PyTorch loop of encoders/onlstm/backends/loop/
// steps_torch.py). onlstm_tasks/native/library.py loads it with torch.ops.load_library and native/onlstm.py is its
// Python face; the public operator onlstm_tasks::onlstm_layer (encoders/onlstm/layer_op.py) calls these kernels,
// through the loop back end's compiled steps (encoders/onlstm/backends/loop/steps_compiled.py), as its CPU
// implementation.
//
// The element-wise work follows the update written once in encoders/onlstm/equations.py (onlstm_update), in the
// regrouped form and conventions described there, exactly as steps_torch.py does: the pre-activations come with doubled
// cell-candidate rows and negated input/forget rows, and the cell buffers hold doubled cell states 2c, so one
// sigmoid gives o, sigmoid(2g), 1 - i and 1 - f, and tanh(c) = 2 sigmoid(2c) - 1. One pass per row does all of a
// step's element-wise work (PyTorch runs a dozen short passes there, each dominated by its fixed cost at NER
// shapes); the exponential is a polynomial written so that the loops vectorise.
//
// The recurrent products are ATen's: at::addmm_ (MKL's or OpenBLAS's sgemm) on views of the rows a piece runs. Threads are ATen's: at::parallel_for over pieces (the directions of a bidirectional layer, then blocks of
// rows), each of which runs every time step of its rows and never waits for the others (rows of an RNN never
// interact). Inside a parallel region the products run on one thread.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) \
    && __GNUC__ >= 12  // target_clones needs ifunc (glibc) and, for x86-64-v3, GCC 12
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#define RESTRICT __restrict__
#else
#define INLINE static inline
#define RESTRICT
#endif

namespace {

// A [K, T, B, n] float32 buffer seen per step t, direction k and row r: the n values of (t, k, r) are contiguous at
// base + t * st + k * sk + r * sr (st = 0 for a [K, B, n] buffer reused at every step; base null: absent).
struct Strided {
  float *base = nullptr;
  int64_t st = 0, sk = 0, sr = 0;
  float *at(int64_t t, int64_t k, int64_t r) const { return base + t * st + k * sk + r * sr; }
};

Strided strided(const c10::optional<at::Tensor> &tensor, const char *name) {
  Strided s;
  if (!tensor.has_value() || !tensor->defined()) return s;
  const at::Tensor &x = *tensor;
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.device().is_cpu(), name, ": expected a float32 CPU tensor");
  TORCH_CHECK(x.dim() == 3 || x.dim() == 4, name, ": expected [K, T, B, n] or [K, B, n], got ", x.sizes());
  TORCH_CHECK(x.stride(-1) == 1, name, ": the last axis must be contiguous");
  s.base = x.data_ptr<float>();
  s.sk = x.stride(0);
  if (x.dim() == 4) {
    s.st = x.stride(1);
    s.sr = x.stride(2);
  } else {
    s.sr = x.stride(1);
  }
  return s;
}

// ---- The recurrent products: c [m, n] += a [m, depth] B on weights packed once per layer call ----
//
// Each step multiplies a few rows (a piece's share of the batch) by the same weights: act_t += h_{t-1} W^T forward,
// d_h_t += d_pre_{t+1} W backward. ATen's products (MKL's sgemm behind at::addmm_) re-arrange panels of the weight at
// every call; here the weight is packed once per layer call into panels of PANEL columns stored depth-major, so that
// a register block of up to MR rows x PANEL columns reads one panel straight through. Kept because it beats ATen's
// options by more than 10% at these shapes (AMD EPYC, 2026-11-27): against at::addmm_, one thread, packing excluded
// (the same product in the project's previous C library), 0.89x of the time at 32 x 256 x 1088 (a NER step), 0.84x
// at 16 rows (half a NER step on two threads), 0.55x at 20 x 1150 x 4830 (a language model step); a NER layer's
// forward loop took 7.96 ms with it against 9.2 ms with at::addmm_ (one thread, torch.profiler); MKL's packed GEMM
// (torch.ops.mkl._mkl_linear) was no faster than at::addmm_. Against torch.bmm with the packing included
// (python scripts/benchmark_encoders.py --products): 0.86-0.88x for a NER layer's projection, 0.77-0.84x for the
// language model's projection and input gradient, which is why those products go through here too.
constexpr int64_t PANEL = 16, MR = 6, KC = 256, FUSED_DEPTH = 512;

// The [depth, n] matrix whose element (k, j) is w[k * sk + j * sn] times scale[j] (scale null: 1) into panels:
// panel p's element (k, j) at out[(p * depth + k) * PANEL + j]; the columns past n of the last panel are zeros.
CLONES void pack_panels(const float *RESTRICT w, int64_t depth, int64_t n, int64_t sk, int64_t sn,
                        const float *RESTRICT scale, float *RESTRICT out) {
  for (int64_t p = 0; p * PANEL < n; p++) {
    float *o = out + p * depth * PANEL;
    const int64_t first = p * PANEL, cols = std::min(PANEL, n - first);
    float factor[PANEL];
    for (int64_t j = 0; j < PANEL; j++) factor[j] = j < cols ? (scale ? scale[first + j] : 1.0f) : 0.0f;
    if (sn <= sk) {  // the source's rows run along j: read them in order
      for (int64_t k = 0; k < depth; k++)
        for (int64_t j = 0; j < PANEL; j++) o[k * PANEL + j] = j < cols ? w[k * sk + (first + j) * sn] * factor[j] : 0.0f;
    } else {  // they run along k (the transposed weight)
      for (int64_t j = 0; j < PANEL; j++) {
        const float *src = w + (first + j) * sn;
        for (int64_t k = 0; k < depth; k++) o[k * PANEL + j] = j < cols ? src[k * sk] * factor[j] : 0.0f;
      }
    }
  }
}

int64_t packed_size(int64_t depth, int64_t n) { return (n + PANEL - 1) / PANEL * PANEL * depth; }

#if defined(__GNUC__) || defined(__clang__)
typedef float vec8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t ivec8 __attribute__((vector_size(32)));

// acc[i] += a[i, :] b for a panel slice b (depth x PANEL, depth-major) and the block's rows of a copied k-major
// (a[k rows + i]); with `fetch`, also asks for the line of `next` (the next panel's slice) as far ahead.
INLINE void block_term(const int rows, const bool fetch, vec8 acc[MR][2], const float *a, int64_t depth,
                       const float *b, const float *next) {
  for (int64_t k = 0; k < depth; k++) {
    if (fetch) __builtin_prefetch(next + k * PANEL, 0, 3);
    const vec8 b0 = *(const vec8 *)(b + k * PANEL), b1 = *(const vec8 *)(b + k * PANEL + 8);
    for (int i = 0; i < rows; i++) {
      const float x = a[k * rows + i];
      acc[i][0] += x * b0;
      acc[i][1] += x * b1;
    }
  }
}

// One register block of `rows` rows and the columns [p PANEL, p PANEL + cols): c += a B.
INLINE void block(const int rows, const bool fetch, int64_t p, int64_t n, int64_t cols, const float *a, int64_t depth,
                  const float *packed, int64_t stride, float *c, int64_t ldc) {
  vec8 acc[MR][2];
  for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = (vec8){0.0f};
  for (int i = 0; i < rows; i++) {  // c is read after the products: ask for its lines now
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + PANEL - 1, 1, 3);
  }
  const int64_t q = (p + 1) * PANEL < n ? p + 1 : p;  // the next panel, whose slices are fetched meanwhile
  block_term(rows, fetch, acc, a, depth, packed + p * stride, packed + q * stride);
  for (int i = 0; i < rows; i++) {
    float *ci = c + i * ldc;
    if (cols == PANEL) {
      *(vec8 *)ci = *(vec8 *)ci + acc[i][0];
      *(vec8 *)(ci + 8) = *(vec8 *)(ci + 8) + acc[i][1];
    } else {
      float sum[PANEL];
      std::memcpy(sum, &acc[i][0], sizeof acc[i][0]);
      std::memcpy(sum + 8, &acc[i][1], sizeof acc[i][1]);
      for (int64_t j = 0; j < cols; j++) ci[j] += sum[j];
    }
  }
}

INLINE void copy_rows_plain(const float *a, int64_t lda, int64_t depth, int64_t rows, int64_t k_begin,
                            float *RESTRICT out) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = k_begin; k < depth; k++) out[k * rows + i] = a[i * lda + k];
}

// The block's `rows` (constant, at most 6) rows of a copied k-major, 8 columns at a time: the rows loaded as vectors
// (rows past `rows` repeat row 0), transposed in registers, then each column's values stored together (the plain
// loops store one float at a time at a stride, which took a tenth of the backward loop at NER shapes).
INLINE void copy_block(const int rows, const float *a, int64_t lda, int64_t depth, float *RESTRICT out) {
  int64_t k = 0;
  for (; k + 8 <= depth; k += 8) {
    vec8 v[8], u[8], s[8];
    for (int i = 0; i < 8; i++) v[i] = *(const vec8 *)(a + (i < rows ? i : 0) * lda + k);
    for (int i = 0; i < 8; i += 2) {
      u[i] = __builtin_shuffle(v[i], v[i + 1], (ivec8){0, 8, 1, 9, 4, 12, 5, 13});
      u[i + 1] = __builtin_shuffle(v[i], v[i + 1], (ivec8){2, 10, 3, 11, 6, 14, 7, 15});
    }
    for (int i = 0; i < 8; i += 4)
      for (int j = 0; j < 2; j++) {
        s[i + 2 * j] = __builtin_shuffle(u[i + j], u[i + j + 2], (ivec8){0, 1, 8, 9, 4, 5, 12, 13});
        s[i + 2 * j + 1] = __builtin_shuffle(u[i + j], u[i + j + 2], (ivec8){2, 3, 10, 11, 6, 7, 14, 15});
      }
    for (int j = 0; j < 4; j++) {  // column j from s[j] (rows 0-3) and s[j + 4] (rows 4-7), column j + 4 too
      const vec8 lo = __builtin_shuffle(s[j], s[j + 4], (ivec8){0, 1, 2, 3, 8, 9, 10, 11});
      const vec8 hi = __builtin_shuffle(s[j], s[j + 4], (ivec8){4, 5, 6, 7, 12, 13, 14, 15});
      std::memcpy(out + (k + j) * rows, &lo, sizeof(float) * rows);
      std::memcpy(out + (k + j + 4) * rows, &hi, sizeof(float) * rows);
    }
  }
  copy_rows_plain(a, lda, depth, rows, k, out);
}

INLINE void copy_rows(const float *a, int64_t lda, int64_t depth, int64_t rows, float *RESTRICT out) {
  switch (rows) {  // constant row counts, so that each copy unrolls
    case 6: copy_block(6, a, lda, depth, out); break;
    case 5: copy_block(5, a, lda, depth, out); break;
    case 4: copy_block(4, a, lda, depth, out); break;
    default: copy_rows_plain(a, lda, depth, rows, 0, out); break;
  }
}
#else
INLINE void block(const int rows, const bool, int64_t p, int64_t, int64_t cols, const float *a, int64_t depth,
                  const float *packed, int64_t stride, float *c, int64_t ldc) {
  float acc[MR][PANEL] = {};
  const float *b = packed + p * stride;
  for (int64_t k = 0; k < depth; k++)
    for (int i = 0; i < rows; i++)
      for (int j = 0; j < PANEL; j++) acc[i][j] += a[k * rows + i] * b[k * PANEL + j];
  for (int i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) c[i * ldc + j] += acc[i][j];
}

INLINE void copy_rows(const float *a, int64_t lda, int64_t depth, int64_t rows, float *RESTRICT out) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = 0; k < depth; k++) out[k * rows + i] = a[i * lda + k];
}
#endif

// One pass: per panel of columns, per block of rows (ceil(m / MR) blocks of about equal rows: a block needs 5 rows
// or more to keep both FMA units busy), the block's sums stay in registers and c is written once. `copy`: m x depth
// floats.
INLINE void product_pass(const bool fetch, int64_t m, int64_t n, const float *a, int64_t lda, int64_t depth,
                         const float *packed, int64_t stride, float *c, int64_t ldc, float *copy) {
  const int64_t blocks = (m + MR - 1) / MR;
  for (int64_t b = 0, r = 0; r < m; b++) {
    const int64_t rows = m / blocks + (b < m % blocks);
    copy_rows(a + r * lda, lda, depth, rows, copy + r * depth);
    r += rows;
  }
  for (int64_t p = 0; p * PANEL < n; p++) {
    const int64_t cols = std::min(PANEL, n - p * PANEL);
    for (int64_t b = 0, r = 0; r < m; b++) {
      const int64_t rows = m / blocks + (b < m % blocks);
      const float *ar = copy + r * depth;
      float *cr = c + r * ldc + p * PANEL;
      switch (rows) {  // constant row counts, so that each block unrolls
        case 6: block(6, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
        case 5: block(5, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
        case 4: block(4, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
        case 3: block(3, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
        case 2: block(2, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
        default: block(1, fetch, p, n, cols, ar, depth, packed, stride, cr, ldc); break;
      }
      r += rows;
    }
  }
}

// c [m, n] (rows ldc apart) += a [m, depth] (rows lda apart) B, B packed by pack_panels. In one pass up to
// FUSED_DEPTH deep; deeper products (the backward's 1088, the language model's 1150) in passes of KC deep, so that
// each panel slice stays in the L1 cache for every row block, asking for the next panel's slice as they go (the
// slices of one panel are far apart, which the hardware prefetcher does not follow). `copy`: m x depth floats.
INLINE void product(int64_t m, int64_t n, const float *a, int64_t lda, int64_t depth, const float *packed, float *c,
             int64_t ldc, float *copy) {
  const int64_t stride = depth * PANEL;
  if (depth <= FUSED_DEPTH) {
    product_pass(false, m, n, a, lda, depth, packed, stride, c, ldc, copy);
    return;
  }
  for (int64_t k0 = 0; k0 < depth; k0 += KC)
    product_pass(true, m, n, a + k0, lda, std::min(KC, depth - k0), packed + k0 * PANEL, stride, c, ldc, copy);
}

// exp(x) to about 2 ulp for |x| <= 88 (saturating beyond): x = n ln2 + r with |r| <= ln2 / 2, a degree-7
// polynomial for exp(r) (Cody-Waite split of ln2, coefficients as in Cephes' expf), 2^n built in the exponent bits.
// Branch-free so that loops calling it vectorise; NaN passes through.
INLINE float exp_poly(float x) {
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  float n = x * 1.44269504088896341f;
  n = (n + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 * 2^23 pushes the fraction out
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) * (1 << 23);
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

// softmax of z[0..L) into p, then its cumulative sum into m (descending: 1 - cumsum, plus p if symmetric)
INLINE void master_gate(int64_t L, const float *z, float *RESTRICT p, float *RESTRICT m, bool descending,
                        bool symmetric) {
  float top = z[0];
  for (int64_t l = 1; l < L; l++) top = z[l] > top ? z[l] : top;
  for (int64_t l = 0; l < L; l++) p[l] = exp_poly(z[l] - top);
  float sum = 0.0f;
  for (int64_t l = 0; l < L; l++) sum += p[l];
  float inv = 1.0f / sum, run = 0.0f;
  for (int64_t l = 0; l < L; l++) {
    p[l] *= inv;
    run += p[l];
    m[l] = descending ? (symmetric ? 1.0f - run + p[l] : 1.0f - run) : run;
  }
}

INLINE void sigmoid_inplace(int64_t n, float *RESTRICT x) {
  for (int64_t j = 0; j < n; j++) x[j] = sigmoid(x[j]);
}

// One row's neurons after sigmoid_inplace over the four gate blocks: ao, ac, ai, af hold o, sigmoid(2g), 1 - i and
// 1 - f; mi, mf the i~ and f~ of each neuron's level; cp 2 c_{t-1}; writes 2 c_t and h (and, when c_hat is non-null,
// what the backward reads).
INLINE void neurons(int64_t H, const float *RESTRICT ao, const float *RESTRICT ac, const float *RESTRICT ai,
                    const float *RESTRICT af, const float *RESTRICT mi, const float *RESTRICT mf,
                    const float *RESTRICT cp, float *RESTRICT cn, float *RESTRICT h) {
  for (int64_t j = 0; j < H; j++) {
    float w = mi[j] * mf[j];
    float c = cp[j] * (mf[j] - w * af[j]) + (4.0f * ac[j] - 2.0f) * (mi[j] - w * ai[j]);
    cn[j] = c;
    h[j] = ao[j] * (2.0f * sigmoid(c) - 1.0f);
  }
}

INLINE void neurons_saved(int64_t H, const float *RESTRICT ao, const float *RESTRICT ac, const float *RESTRICT ai,
                          const float *RESTRICT af, const float *RESTRICT mi, const float *RESTRICT mf,
                          const float *RESTRICT cp, float *RESTRICT cn, float *RESTRICT h, float *RESTRICT c_hat_out,
                          float *RESTRICT eff_in_out, float *RESTRICT eff_forget_out, float *RESTRICT tanh_c) {
  for (int64_t j = 0; j < H; j++) {
    float c_hat = 4.0f * ac[j] - 2.0f, w = mi[j] * mf[j];
    float eff_in = mi[j] - w * ai[j], eff_forget = mf[j] - w * af[j];
    float c = cp[j] * eff_forget + c_hat * eff_in;
    float tc = 2.0f * sigmoid(c) - 1.0f;
    c_hat_out[j] = c_hat;
    eff_in_out[j] = eff_in;
    eff_forget_out[j] = eff_forget;
    tanh_c[j] = tc;
    cn[j] = c;
    h[j] = ao[j] * tc;
  }
}

// Everything a layer's forward steps read and write (buffers as Strided; see forward_loop for their shapes).
struct Forward {
  int64_t hidden, levels, chunk;
  bool symmetric, save;
  Strided act, h, master, c_prev, c_new, forget_distance, input_distance, prob, c_hat, omega, eff, tanh_c;
};

// Step t's element-wise work on rows [r_begin, r_end) of direction k; `scratch`: 2 H + 2 L floats.
INLINE void step_rows(const Forward &x, const Strided &c_prev, const Strided &c_new, int64_t t, int64_t k,
                      int64_t r_begin, int64_t r_end, float *scratch) {
  const int64_t H = x.hidden, L = x.levels, C = x.chunk;
  float *mi = scratch, *mf = scratch + H, *probs = scratch + 2 * H;
  for (int64_t r = r_begin; r < r_end; r++) {
    float *a = x.act.at(t, k, r), *m = x.master.at(t, k, r);
    float *p = x.save ? x.prob.at(t, k, r) : probs;
    master_gate(L, a, p, m, true, x.symmetric);
    master_gate(L, a + L, p + L, m + L, false, false);
    float sum_i = 0.0f, sum_f = 0.0f;  // the distances: means of i~ and f~ over the levels
    for (int64_t l = 0; l < L; l++) {
      sum_i += m[l];
      sum_f += m[L + l];
    }
    *x.forget_distance.at(t, k, r) = 1.0f - sum_f / (float)L;
    *x.input_distance.at(t, k, r) = sum_i / (float)L;
    if (x.save) {
      float *omega = x.omega.at(t, k, r);
      for (int64_t l = 0; l < L; l++) omega[l] = m[l] * m[L + l];
    }
    for (int64_t l = 0; l < L; l++) {
      for (int64_t j = 0; j < C; j++) {
        mi[l * C + j] = m[l];
        mf[l * C + j] = m[L + l];
      }
    }
    float *ao = a + 2 * L, *ac = ao + H, *ai = ac + H, *af = ai + H;
    sigmoid_inplace(4 * H, ao);  // o, sigmoid(2g), 1 - i, 1 - f: in place (the backward reads them)
    float *cp = c_prev.at(t, k, r), *cn = c_new.at(t, k, r), *h = x.h.at(t, k, r);
    if (x.save) {
      float *eff = x.eff.at(t, k, r);
      neurons_saved(H, ao, ac, ai, af, mi, mf, cp, cn, h, x.c_hat.at(t, k, r), eff, eff + H, x.tanh_c.at(t, k, r));
    } else {
      neurons(H, ao, ac, ai, af, mi, mf, cp, cn, h);
    }
  }
}

// Every step of rows [r_begin, r_end) of direction k: act_t += h_{t-1} W (W [H, G] the scaled recurrent weight
// transposed, packed by pack_panels at `packed`; h_{-1} from h0, or no product from a zero state), then step t's
// element-wise work. `alternate`: c_prev / c_new are two [K, B, H] slots that swap at every step.
CLONES void forward_piece(const Forward &x, const float *packed, const Strided &h0, const int64_t *rows_at,
                          int64_t stop, bool alternate, int64_t k, int64_t r_begin, int64_t r_end) {
  const int64_t H = x.hidden, G = 4 * H + 2 * x.levels;
  std::vector<float> scratch(2 * H + 2 * x.levels), copy((r_end - r_begin) * H);
  for (int64_t t = 0; t < stop; t++) {
    const int64_t end = std::min(rows_at[t], r_end), rows = end - r_begin;
    if (rows <= 0) break;  // rows_at never grows: none of these rows runs again
    const float *prev = t > 0 ? x.h.at(t - 1, k, r_begin) : (h0.base ? h0.at(0, k, r_begin) : nullptr);
    const int64_t ld_prev = t > 0 ? x.h.sr : h0.sr;
    if (prev != nullptr)  // act_t [rows, G] += prev [rows, H] W [H, G]
      product(rows, G, prev, ld_prev, H, packed, x.act.at(t, k, r_begin), x.act.sr, copy.data());
    const bool odd = alternate && (t & 1);
    step_rows(x, odd ? x.c_new : x.c_prev, odd ? x.c_prev : x.c_new, t, k, r_begin, end, scratch.data());
  }
}

// The pieces a loop over `dirs` directions and `batch` rows is cut into: (direction, first row, end row), one per
// thread at most, directions first, then equal blocks of rows.
std::vector<std::array<int64_t, 3>> pieces(int64_t dirs, int64_t batch) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(batch, threads / std::max<int64_t>(1, dirs)));
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t k = 0; k < dirs; k++)
    for (int64_t b = 0; b < blocks; b++) out.push_back({k, batch * b / blocks, batch * (b + 1) / blocks});
  return out;
}

void run_pieces(const std::vector<std::array<int64_t, 3>> &work,
                const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  if (work.size() == 1) {
    fn(work[0][0], work[0][1], work[0][2]);
    return;
  }
  at::parallel_for(0, (int64_t)work.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) fn(work[i][0], work[i][1], work[i][2]);
  });
}

CLONES void product_rows(int64_t m, int64_t n, const float *a, int64_t lda, int64_t depth, const float *packed,
                         float *c, int64_t ldc, float *copy) {
  product(m, n, a, lda, depth, packed, c, ldc, copy);
}

// Each direction's matrix of a contiguous float32 [K, R, C] (a weight as PyTorch stores it, [G, H] or [G, D]),
// packed by pack_panels one after the other, on ATen's threads: transposed ([C, R], each column j scaled by
// scale[j] when scale is given; the forward's products) or as it is ([R, C]; the backward's).
std::vector<float> pack(const at::Tensor &weight, const float *scale, bool transpose) {
  const int64_t dirs = weight.size(0), rows = weight.size(1), cols = weight.size(2);
  const int64_t depth = transpose ? cols : rows, n = transpose ? rows : cols, size = packed_size(depth, n);
  const int64_t panels = (n + PANEL - 1) / PANEL;
  std::vector<float> packed(dirs * size);
  const float *w = weight.data_ptr<float>();
  at::parallel_for(0, dirs * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) {  // one panel: element (k, j) of the packed matrix is W[j, k] or W[k, j]
      const int64_t k = i / panels, p = i % panels;
      const float *source = w + k * rows * cols + (transpose ? p * PANEL * cols : p * PANEL);
      pack_panels(source, depth, std::min(PANEL, n - p * PANEL), transpose ? 1 : cols, transpose ? cols : 1,
                  scale ? scale + p * PANEL : nullptr, packed.data() + k * size + p * depth * PANEL);
    }
  });
  return packed;
}

// The levels of a loop's layer (G = 4H + 2L rows of pre-activations), after checking its recurrent weight.
static int64_t check_loop_sizes(const char *op, const at::Tensor &weight, int64_t dirs, int64_t gates,
                                int64_t hidden) {
  const int64_t levels = (gates - 4 * hidden) / 2;
  TORCH_CHECK(levels > 0 && hidden % levels == 0, op, ": inconsistent sizes");
  TORCH_CHECK(weight.is_contiguous() && weight.scalar_type() == at::kFloat && weight.size(0) == dirs &&
                  weight.size(1) == gates && weight.size(2) == hidden,
              op, ": weight must be a contiguous float32 [K, G, H]");
  return levels;
}

// onlstm_tasks::cpu_forward_loop: see the schema in TORCH_LIBRARY_FRAGMENT below and native/onlstm.py.
void cpu_forward_loop(const at::Tensor &act, const at::Tensor &h, const at::Tensor &master, const at::Tensor &c_prev,
                      const at::Tensor &c_new, const at::Tensor &forget_distance, const at::Tensor &input_distance,
                      const c10::optional<at::Tensor> &prob, const c10::optional<at::Tensor> &c_hat,
                      const c10::optional<at::Tensor> &omega, const c10::optional<at::Tensor> &eff,
                      const c10::optional<at::Tensor> &tanh_c, const at::Tensor &weight, const at::Tensor &scale,
                      const c10::optional<at::Tensor> &h0, at::IntArrayRef rows_at, bool symmetric, bool alternate) {
  const int64_t dirs = act.size(0), batch = act.size(2), hidden = h.size(-1), gates = act.size(-1);
  const int64_t levels = check_loop_sizes("cpu_forward_loop", weight, dirs, gates, hidden);
  TORCH_CHECK(scale.is_contiguous() && scale.scalar_type() == at::kFloat && scale.numel() == gates,
              "cpu_forward_loop: scale must be a contiguous float32 [G]");
  TORCH_CHECK((int64_t)rows_at.size() <= act.size(1), "cpu_forward_loop: more steps than the buffers hold");
  Forward x{hidden, levels, hidden / levels, symmetric, prob.has_value() && prob->defined()};
  x.act = strided(act, "act");
  x.h = strided(h, "h");
  x.master = strided(master, "master");
  x.c_prev = strided(c_prev, "c_prev");
  x.c_new = strided(c_new, "c_new");
  x.forget_distance = strided(forget_distance, "forget_distance");
  x.input_distance = strided(input_distance, "input_distance");
  x.prob = strided(prob, "prob");
  x.c_hat = strided(c_hat, "c_hat");
  x.omega = strided(omega, "omega");
  x.eff = strided(eff, "eff");
  x.tanh_c = strided(tanh_c, "tanh_c");
  const Strided initial = strided(h0, "h0");
  const std::vector<float> packed = pack(weight, scale.data_ptr<float>(), true);
  const int64_t *rows = rows_at.data(), stop = (int64_t)rows_at.size(), size = packed_size(hidden, gates);
  run_pieces(pieces(dirs, batch), [&](int64_t k, int64_t r0, int64_t r1) {
    forward_piece(x, packed.data() + k * size, initial, rows, stop, alternate, k, r0, r1);
  });
}

// onlstm_tasks::cpu_product: out[k] += a[k] B[k] for each direction k, B[k] = weight[k] ([R, C]) or, with
// `transpose`, weight[k]^T with column j scaled by scale[j] (scale optional). a [K, M, depth] and out [K, M, n] with
// contiguous rows; the rows are cut into blocks of 120, shared by ATen's threads. The large products of a layer whose
// output is at least 1024 wide (the language model's) go through here: see "The recurrent products" for why.
void cpu_product(const at::Tensor &out, const at::Tensor &a, const at::Tensor &weight,
                 const c10::optional<at::Tensor> &scale, bool transpose) {
  TORCH_CHECK(weight.is_contiguous() && weight.scalar_type() == at::kFloat && weight.dim() == 3,
              "cpu_product: weight must be a contiguous float32 [K, R, C]");
  const int64_t dirs = weight.size(0), depth = transpose ? weight.size(2) : weight.size(1);
  const int64_t n = transpose ? weight.size(1) : weight.size(2), m = a.size(1);
  TORCH_CHECK(a.scalar_type() == at::kFloat && a.dim() == 3 && a.size(0) == dirs && a.size(2) == depth &&
                  a.stride(2) == 1,
              "cpu_product: a must be float32 [K, M, ", depth, "] with contiguous rows");
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.dim() == 3 && out.size(0) == dirs && out.size(1) == m &&
                  out.size(2) == n && out.stride(2) == 1,
              "cpu_product: out must be float32 [K, M, ", n, "] with contiguous rows");
  const float *factors = nullptr;
  if (scale.has_value() && scale->defined()) {
    TORCH_CHECK(scale->is_contiguous() && scale->numel() == n, "cpu_product: scale must be a contiguous [", n, "]");
    factors = scale->data_ptr<float>();
  }
  const std::vector<float> packed = pack(weight, factors, transpose);
  const int64_t size = packed_size(depth, n), chunk = 120, chunks = (m + chunk - 1) / chunk;
  const float *a_data = a.data_ptr<float>();
  float *out_data = out.data_ptr<float>();
  at::parallel_for(0, dirs * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> copy(chunk * depth);
    for (int64_t i = begin; i < end; i++) {
      const int64_t k = i / chunks, r = (i % chunks) * chunk, rows = std::min(chunk, m - r);
      product_rows(rows, n, a_data + k * a.stride(0) + r * a.stride(1), a.stride(1), depth, packed.data() + k * size,
                   out_data + k * out.stride(0) + r * out.stride(1), out.stride(1), copy.data());
    }
  });
}

// What the backward of a layer's steps reads and writes.
struct Backward {
  int64_t hidden, levels, chunk;
  bool symmetric;
  Strided d_h;      // [H] dL/dh_t (the recurrent part is added here)
  Strided act;      // [2L | o | sigmoid(2g) | 1 - i | 1 - f], as the forward left them
  Strided tanh_c;   // [H]
  Strided cells;    // [2H] 2 c^_t, 2 c_{t-1}
  Strided eff;      // [2H] eff_in, eff_forget
  Strided omega;    // [L]
  Strided master;   // [2L] i~, f~
  Strided prob;     // [2L] p_i, p_f
  Strided d_const;  // [2L] added to dL/d(master logits) (the distances' share); base null: none
  Strided d_pre;    // [2L | H | H | H | H] out: dL/d(pre-activations)
  Strided carry;    // [K, B, H] in: dL/dc_t from step t + 1; out: dL/dc_{t-1}
};

// dL/dz of p = softmax(z) from g = dL/dp, plus `add` (null: nothing)
INLINE void softmax_backward(int64_t L, const float *RESTRICT p, const float *RESTRICT g, const float *add,
                             float *RESTRICT dz) {
  float dot = 0.0f;
  for (int64_t l = 0; l < L; l++) dot += p[l] * g[l];
  for (int64_t l = 0; l < L; l++) dz[l] = p[l] * (g[l] - dot) + (add ? add[l] : 0.0f);
}

INLINE void neurons_backward(int64_t H, const float *RESTRICT dh, const float *RESTRICT o,
                             const float *RESTRICT tanh_c, const float *RESTRICT cell, const float *RESTRICT eff,
                             const float *RESTRICT w_of, const float *RESTRICT not_i, const float *RESTRICT not_f,
                             float *RESTRICT carry, bool carried, float *RESTRICT d_out, float *RESTRICT d_cand,
                             float *RESTRICT d_in, float *RESTRICT d_forget, float *RESTRICT s_in,
                             float *RESTRICT s_forget, float *RESTRICT s_bar) {
  for (int64_t j = 0; j < H; j++) {
    float d_tc = dh[j] * o[j], u = d_tc * tanh_c[j];
    d_out[j] = u * (1.0f - o[j]);
    float dc = d_tc - u * tanh_c[j] + (carried ? carry[j] : 0.0f);  // dL/dc_t
    float c_hat = 0.5f * cell[j];
    float de_in = dc * c_hat, de_forget = 0.5f * dc * cell[H + j];  // dL/d eff_in, dL/d eff_forget
    float d_c_hat = dc * eff[j];
    carry[j] = dc * eff[H + j];
    d_cand[j] = d_c_hat * (1.0f - c_hat * c_hat);
    float w = w_of[j], si = not_i[j], sf = not_f[j];
    d_in[j] = de_in * w * si * (1.0f - si);
    d_forget[j] = de_forget * w * sf * (1.0f - sf);
    s_in[j] = de_in;
    s_forget[j] = de_forget;
    s_bar[j] = de_in * si + de_forget * sf;
  }
}

// Step t's backward on rows [r_begin, r_end) of direction k; rows below `carry_rows` add dL/dc_t from step t + 1.
// `scratch`: 4 H + 4 L floats.
INLINE void step_backward_rows(const Backward &x, int64_t t, int64_t k, int64_t r_begin, int64_t r_end,
                               int64_t carry_rows, float *scratch) {
  const int64_t H = x.hidden, L = x.levels, C = x.chunk;
  float *w_of = scratch, *s_in = w_of + H, *s_forget = s_in + H, *s_bar = s_forget + H;
  float *g = s_bar + H, *sums = g + 2 * L;
  for (int64_t r = r_begin; r < r_end; r++) {
    const float *dh = x.d_h.at(t, k, r), *a = x.act.at(t, k, r), *tanh_c = x.tanh_c.at(t, k, r);
    const float *cell = x.cells.at(t, k, r), *eff = x.eff.at(t, k, r);
    const float *omega = x.omega.at(t, k, r), *m = x.master.at(t, k, r), *p = x.prob.at(t, k, r);
    float *d = x.d_pre.at(t, k, r), *carry = x.carry.at(0, k, r);
    const float *o = a + 2 * L, *not_i = o + 2 * H, *not_f = o + 3 * H;
    float *d_out = d + 2 * L, *d_cand = d_out + H, *d_in = d_out + 2 * H, *d_forget = d_out + 3 * H;
    for (int64_t l = 0; l < L; l++)
      for (int64_t j = 0; j < C; j++) w_of[l * C + j] = omega[l];
    neurons_backward(H, dh, o, tanh_c, cell, eff, w_of, not_i, not_f, carry, r < carry_rows, d_out, d_cand, d_in,
                     d_forget, s_in, s_forget, s_bar);
    // per level: sums over its C neurons, then dL/d[i~, f~] (eff = [i~, f~] - i~ f~ (1 - [i, f]))
    for (int64_t l = 0; l < L; l++) {
      float a_in = 0.0f, a_forget = 0.0f, a_bar = 0.0f;
      for (int64_t j = l * C; j < (l + 1) * C; j++) {
        a_in += s_in[j];
        a_forget += s_forget[j];
        a_bar += s_bar[j];
      }
      sums[l] = a_in - m[L + l] * a_bar;      // dL/d i~_l
      sums[L + l] = a_forget - m[l] * a_bar;  // dL/d f~_l
    }
    // dL/dp through the cumulative sums: f~ = cumsum(p_f), so dL/dp_f = reverse cumsum of dL/df~; paper
    // i~ = 1 - cumsum(p_i): minus its reverse cumsum; symmetric i~ = reverse cumsum of p_i: its cumsum
    float run_f = 0.0f, run_i = 0.0f;
    for (int64_t l = L - 1; l >= 0; l--) {
      run_f += sums[L + l];
      g[L + l] = run_f;
    }
    if (x.symmetric) {
      for (int64_t l = 0; l < L; l++) {
        run_i += sums[l];
        g[l] = run_i;
      }
    } else {
      for (int64_t l = L - 1; l >= 0; l--) {
        run_i += sums[l];
        g[l] = -run_i;
      }
    }
    const float *add = x.d_const.base ? x.d_const.at(t, k, r) : nullptr;
    softmax_backward(L, p, g, add, d);
    softmax_backward(L, p + L, g + L, add ? add + L : nullptr, d + L);
  }
}

// Every step of rows [r_begin, r_end) of direction k, last first: dL/dh_t += dL/d(pre-activations)_{t+1} W (W the
// unscaled recurrent weight [G, H], packed at `packed`) on the rows running at t + 1, then step t's element-wise
// backward. After the last step the first `last_carry` rows start from the carry buffer's dL/dc.
CLONES void backward_piece(const Backward &x, const float *packed, const int64_t *rows_at, int64_t stop,
                           int64_t last_carry, int64_t k, int64_t r_begin, int64_t r_end) {
  const int64_t H = x.hidden, G = 4 * H + 2 * x.levels;
  std::vector<float> scratch(4 * H + 4 * x.levels), copy((r_end - r_begin) * G);
  for (int64_t t = stop - 1; t >= 0; t--) {
    const int64_t end = std::min(rows_at[t], r_end);
    if (end <= r_begin) continue;
    const int64_t next = t + 1 < stop ? rows_at[t + 1] : last_carry;
    const int64_t next_end = t + 1 < stop ? std::min(next, r_end) : 0;
    if (next_end > r_begin)  // d_h_t [rows, H] += d_pre_{t+1} [rows, G] W [G, H]
      product(next_end - r_begin, H, x.d_pre.at(t + 1, k, r_begin), x.d_pre.sr, G, packed, x.d_h.at(t, k, r_begin),
              x.d_h.sr, copy.data());
    step_backward_rows(x, t, k, r_begin, end, next, scratch.data());
  }
}

void cpu_backward_loop(const at::Tensor &d_h, const at::Tensor &act, const at::Tensor &tanh_c, const at::Tensor &cells,
                       const at::Tensor &eff, const at::Tensor &omega, const at::Tensor &master, const at::Tensor &prob,
                       const c10::optional<at::Tensor> &d_const, const at::Tensor &d_pre, const at::Tensor &carry,
                       const at::Tensor &weight, at::IntArrayRef rows_at, int64_t last_carry, bool symmetric) {
  const int64_t dirs = act.size(0), batch = act.size(2), hidden = d_h.size(-1), gates = act.size(-1);
  const int64_t levels = check_loop_sizes("cpu_backward_loop", weight, dirs, gates, hidden);
  TORCH_CHECK(carry.dim() == 3, "cpu_backward_loop: carry must be [K, B, H]");
  Backward x{hidden, levels, hidden / levels, symmetric};
  x.d_h = strided(d_h, "d_h");
  x.act = strided(act, "act");
  x.tanh_c = strided(tanh_c, "tanh_c");
  x.cells = strided(cells, "cells");
  x.eff = strided(eff, "eff");
  x.omega = strided(omega, "omega");
  x.master = strided(master, "master");
  x.prob = strided(prob, "prob");
  x.d_const = strided(d_const, "d_const");
  x.d_pre = strided(d_pre, "d_pre");
  x.carry = strided(carry, "carry");
  const std::vector<float> packed = pack(weight, nullptr, false);
  const int64_t *rows = rows_at.data(), stop = (int64_t)rows_at.size(), size = packed_size(gates, hidden);
  run_pieces(pieces(dirs, batch), [&](int64_t k, int64_t r0, int64_t r1) {
    backward_piece(x, packed.data() + k * size, rows, stop, last_carry, k, r0, r1);
  });
}

// Random words for DropConnect masks: 16 xoshiro128++ generators (Blackman & Vigna, "Scrambled linear pseudorandom
// number generators", 2021) side by side, word 16 k + l from generator l, so that the loop vectorises. `state`
// (int32 [64], any values; seeded by dropconnect.py from torch's generator, which keeps torch.manual_seed in charge)
// holds s0[16], s1[16], s2[16], s3[16] and is advanced in place. About seven times faster than torch's CPU random_.
constexpr int STREAMS = 16;

INLINE uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

CLONES void xoshiro_words(uint32_t *RESTRICT out, int64_t words, uint32_t *RESTRICT state) {
  uint32_t *s0 = state, *s1 = state + STREAMS, *s2 = state + 2 * STREAMS, *s3 = state + 3 * STREAMS;
  for (int l = 0; l < STREAMS; l++)
    if ((s0[l] | s1[l] | s2[l] | s3[l]) == 0) s0[l] = 1;  // the one state xoshiro cannot leave (chance 2^-128)
  uint32_t chunk[STREAMS];
  for (int64_t first = 0; first < words; first += STREAMS) {
    for (int l = 0; l < STREAMS; l++) {
      chunk[l] = rotl32(s0[l] + s3[l], 7) + s0[l];
      const uint32_t t = s1[l] << 9;
      s2[l] ^= s0[l];
      s3[l] ^= s1[l];
      s1[l] ^= s2[l];
      s0[l] ^= s3[l];
      s2[l] ^= t;
      s3[l] = rotl32(s3[l], 11);
    }
    const int64_t left = words - first;
    std::memcpy(out + first, chunk, (size_t)(left < STREAMS ? left : STREAMS) * sizeof(uint32_t));
  }
}

at::Tensor random_words(int64_t words, const at::Tensor &state) {
  TORCH_CHECK(state.scalar_type() == at::kInt && state.numel() == 4 * STREAMS && state.is_contiguous() &&
                  state.device().is_cpu(),
              "random_words: expected a contiguous int32 CPU state of ", 4 * STREAMS, " words");
  at::Tensor out = at::empty({words}, state.options());
  xoshiro_words(reinterpret_cast<uint32_t *>(out.data_ptr<int32_t>()), words,
                reinterpret_cast<uint32_t *>(state.data_ptr<int32_t>()));
  return out;
}

// DropConnect: out[i] = in[i] * (kept ? scale : 0), entry i kept when the low 15 bits of lanes[i] are below
// `threshold`; one pass instead of four PyTorch operations, and the backward masks the gradient with the same lanes.
CLONES void mask_values(float *RESTRICT out, const float *RESTRICT in, const int16_t *RESTRICT lanes, int64_t n,
                        int32_t threshold, float scale) {
  for (int64_t i = 0; i < n; i++) out[i] = in[i] * (((int32_t)lanes[i] & 0x7FFF) < threshold ? scale : 0.0f);
}

at::Tensor dropconnect(const at::Tensor &values, const at::Tensor &lanes, int64_t threshold, double scale) {
  TORCH_CHECK(values.scalar_type() == at::kFloat && values.device().is_cpu(), "dropconnect: float32 CPU values");
  TORCH_CHECK(lanes.scalar_type() == at::kShort && lanes.numel() == values.numel() && lanes.is_contiguous(),
              "dropconnect: expected ", values.numel(), " contiguous int16 lanes");
  at::Tensor in = values.contiguous(), out = at::empty_like(in);
  mask_values(out.data_ptr<float>(), in.data_ptr<float>(), lanes.data_ptr<int16_t>(), in.numel(), (int32_t)threshold,
              (float)scale);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(onlstm_tasks, m) {
  m.def("cpu_forward_loop(Tensor(a!) act, Tensor(b!) h, Tensor(c!) master, Tensor(d!) c_prev, Tensor(e!) c_new, "
        "Tensor(f!) forget_distance, Tensor(g!) input_distance, Tensor(h!)? prob, Tensor(i!)? c_hat, "
        "Tensor(j!)? omega, Tensor(k!)? eff, Tensor(l!)? tanh_c, Tensor weight, Tensor scale, Tensor? h0, int[] rows_at, "
        "bool symmetric, bool alternate) -> ()");
  m.def("cpu_backward_loop(Tensor(a!) d_h, Tensor act, Tensor tanh_c, Tensor cells, Tensor eff, Tensor omega, "
        "Tensor master, Tensor prob, Tensor? d_const, Tensor(b!) d_pre, Tensor(c!) carry, Tensor weight, "
        "int[] rows_at, int last_carry, bool symmetric) -> ()");
  m.def("cpu_product(Tensor(a!) out, Tensor a, Tensor weight, Tensor? scale, bool transpose) -> ()");
  m.def("cpu_random_words(int words, Tensor(a!) state) -> Tensor");
  m.def("cpu_dropconnect(Tensor values, Tensor lanes, int threshold, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(onlstm_tasks, CPU, m) {
  m.impl("cpu_forward_loop", &cpu_forward_loop);
  m.impl("cpu_backward_loop", &cpu_backward_loop);
  m.impl("cpu_product", &cpu_product);
  m.impl("cpu_random_words", &random_words);
  m.impl("cpu_dropconnect", &dropconnect);
}
