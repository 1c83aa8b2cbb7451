/* The element-wise work of one ON-LSTM time step, for every row and direction, in one call (float32, CPU).
 *
 * Optional: built by `pip install` when a C compiler is present, loaded through ctypes by compiled.py, and
 * replaced by the PyTorch back end (steps_torch.py) when absent. It computes the update written once in
 * equations.py (onlstm_update; its tests compare against it through the reference cell), in the regrouped form and
 * conventions described there, exactly as that back end does: the pre-activations come with doubled cell-candidate rows
 * and negated input/forget rows, and the cell buffers hold doubled cell states 2c, so one sigmoid gives o,
 * sigmoid(2g), 1 - i and 1 - f, and tanh(c) = 2 sigmoid(2c) - 1. The recurrent matrix product stays in PyTorch (its BLAS is the right tool);
 * this file replaces the dozen small tensor operations that follow it at every step.
 *
 * onlstm_step_backward does the same for the backward of a step (the hand-derived gradient that
 * steps_torch.backward_steps computes with PyTorch operations): the recurrent product into dL/dh and the
 * three big products at the end stay in PyTorch (layer_pass.py, function.py).
 *
 * onlstm_random_words and onlstm_dropconnect draw and apply DropConnect masks (dropconnect.py's drop_connect): a faster
 * generator than torch's CPU mt19937, and one pass instead of four PyTorch operations.
 *
 * Why compiled: PyTorch runs each of those operations as a separate pass over memory, and at NER shapes (32 rows x
 * 256 neurons) each pass is short enough for the fixed cost of an operation to dominate. Here one pass per row does
 * all of it. The exponential is a polynomial written so that the compiler vectorises the loops (a scalar expf per
 * element was measured slower than PyTorch's vectorised kernels); on x86-64 Linux a second copy of every function
 * is compiled for AVX2 + FMA (x86-64-v3) and picked at load time when the CPU has them.
 */

#include <stdint.h>
#include <string.h>

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(_MSC_VER)
#define restrict __restrict
#endif

#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) \
    && __GNUC__ >= 12 /* target_clones needs ifunc (glibc) and, for x86-64-v3, GCC 12 */
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* compiled.py refuses a library whose version differs from its own ABI: bump both whenever a struct or a
 * signature changes */
#define ONLSTM_STEP_ABI 6

EXPORT int onlstm_step_abi(void) { return ONLSTM_STEP_ABI; }

/* A [T, K, B, n] array of float32 seen per step t, direction k and row r: the n values of (t, k, r) are contiguous
 * at base + t * st + k * sk + r * sr (strides in elements; st = 0 for a buffer reused at every step). */
typedef struct {
    float *base;
    int64_t st, sk, sr;
} strided;

/* Everything one layer's steps read and write. Must match _Context in compiled.py field for field. */
typedef struct {
    int64_t dirs, hidden, levels, chunk, symmetric;
    float *scratch;  /* 2 * hidden + 2 * levels floats */
    strided act;     /* [2L | H | H | H | H] pre-activations; the four gate blocks get their sigmoids in place */
    strided h;       /* [H] output */
    strided c_prev;  /* [H] 2 c_{t-1} */
    strided c_new;   /* [H] 2 c_t */
    strided master;  /* [2L] i~, f~ */
    int64_t save;    /* nonzero: also write what the backward reads (the five arrays below) */
    strided prob;    /* [2L] p_i, p_f */
    strided c_hat;   /* [H] 2 tanh(g) */
    strided omega;   /* [L] w = i~ f~ */
    strided eff;     /* [2H] eff_in, eff_forget */
    strided tanh_c;  /* [H] tanh(c_t) */
} layer;

#define AT(a, t, k, r) ((a).base + (t) * (a).st + (k) * (a).sk + (r) * (a).sr)

/* exp(x) to about 2 ulp for |x| <= 88 (saturating beyond): x = n ln2 + r with |r| <= ln2 / 2, a degree-7 polynomial
 * for exp(r) (Cody-Waite split of ln2 and coefficients as in Cephes' expf), and 2^n built in the exponent bits.
 * Branch-free (the selects compile to blends) so that loops calling it vectorise. */
INLINE float exp_poly(float x) {
    x = x > 88.0f ? 88.0f : x; /* written so that NaN passes through (and comes out NaN) */
    x = x < -87.0f ? -87.0f : x;
    float n = x * 1.44269504088896341f;
    n = (n + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 pushes the fraction out */
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
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

/* softmax of z[0..L) into p, then its cumulative sum into m (descending: m = 1 - cumsum, plus p if symmetric) */
INLINE void master_gate(int64_t L, const float *z, float *restrict p, float *restrict m, int descending,
                        int symmetric) {
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

/* x[0..n) <- sigmoid(x[0..n)) */
INLINE void sigmoid_inplace(int64_t n, float *restrict x) {
    for (int64_t j = 0; j < n; j++) x[j] = sigmoid(x[j]);
}

/* One row's neurons, after sigmoid_inplace over the four gate blocks: ao, ac, ai, af hold o, sigmoid(2g), 1 - i
 * and 1 - f; mi, mf the i~ and f~ of each neuron's level. With c_hat_out non-NULL also writes what the backward
 * reads. */
INLINE void neurons(int64_t H, const float *restrict ao, const float *restrict ac, const float *restrict ai,
                    const float *restrict af, const float *restrict mi, const float *restrict mf,
                    const float *restrict cp, float *restrict cn, float *restrict h) {
    for (int64_t j = 0; j < H; j++) {
        float w = mi[j] * mf[j];
        float c = cp[j] * (mf[j] - w * af[j]) + (4.0f * ac[j] - 2.0f) * (mi[j] - w * ai[j]);
        cn[j] = c;
        h[j] = ao[j] * (2.0f * sigmoid(c) - 1.0f);
    }
}

INLINE void neurons_saved(int64_t H, const float *restrict ao, const float *restrict ac, const float *restrict ai,
                          const float *restrict af, const float *restrict mi, const float *restrict mf,
                          const float *restrict cp, float *restrict cn, float *restrict h,
                          float *restrict c_hat_out, float *restrict eff_in_out, float *restrict eff_forget_out,
                          float *restrict tanh_c) {
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

/* Step t on rows [r_begin, r_end) of directions [k_begin, k_end). */
INLINE void step_rows(const layer *x, int64_t t, int64_t k_begin, int64_t k_end, int64_t r_begin, int64_t r_end) {
    const int64_t H = x->hidden, L = x->levels, C = x->chunk;
    float *mi = x->scratch, *mf = x->scratch + H, *probs = x->scratch + 2 * H;
    for (int64_t k = k_begin; k < k_end; k++) {
        for (int64_t r = r_begin; r < r_end; r++) {
            float *a = AT(x->act, t, k, r), *m = AT(x->master, t, k, r);
            float *p = x->save ? AT(x->prob, t, k, r) : probs;
            master_gate(L, a, p, m, 1, (int)x->symmetric);
            master_gate(L, a + L, p + L, m + L, 0, 0);
            if (x->save) {
                float *omega = AT(x->omega, t, k, r);
                for (int64_t l = 0; l < L; l++) omega[l] = m[l] * m[L + l];
            }
            for (int64_t l = 0; l < L; l++) {
                for (int64_t j = 0; j < C; j++) {
                    mi[l * C + j] = m[l];
                    mf[l * C + j] = m[L + l];
                }
            }
            float *ao = a + 2 * L, *ac = ao + H, *ai = ac + H, *af = ai + H;
            sigmoid_inplace(4 * H, ao); /* o, sigmoid(2g), 1 - i, 1 - f: in place (the backward reads them) */
            float *cp = AT(x->c_prev, t, k, r), *cn = AT(x->c_new, t, k, r), *h = AT(x->h, t, k, r);
            if (x->save) {
                float *eff = AT(x->eff, t, k, r);
                neurons_saved(H, ao, ac, ai, af, mi, mf, cp, cn, h, AT(x->c_hat, t, k, r), eff, eff + H,
                              AT(x->tanh_c, t, k, r));
            } else {
                neurons(H, ao, ac, ai, af, mi, mf, cp, cn, h);
            }
        }
    }
}

/* Step t on the first `rows` rows of every direction. Returns 0. */
EXPORT CLONES int onlstm_step(const layer *x, int64_t t, int64_t rows) {
    step_rows(x, t, 0, x->dirs, 0, rows);
    return 0;
}

/* What the backward of one step reads and writes. Must match _GradContext in compiled.py field for field. */
typedef struct {
    int64_t dirs, hidden, levels, chunk, symmetric;
    float *scratch;   /* 4 * hidden + 4 * levels floats */
    strided d_h;      /* [H] dL/dh_t, the recurrent part included */
    strided act;      /* [2L | o | sigmoid(2g) | 1 - i | 1 - f], as the forward left them */
    strided tanh_c;   /* [H] */
    strided cells;    /* [2H] 2 c^_t, 2 c_{t-1} */
    strided eff;      /* [2H] eff_in, eff_forget */
    strided omega;    /* [L] */
    strided master;   /* [2L] i~, f~ */
    strided prob;     /* [2L] p_i, p_f */
    strided d_const;  /* [2L] added to dL/d(master logits) (the distances' share); base NULL: none */
    strided d_pre;    /* [2L | H | H | H | H] out: dL/d(pre-activations) */
    strided carry;    /* [H] in: dL/dc_t from step t + 1; out: dL/dc_{t-1} (st = 0: updated in place) */
} layer_grad;

/* dL/dz of a softmax p = softmax(z) from g = dL/dp, plus `add` (NULL: nothing) */
INLINE void softmax_backward(int64_t L, const float *restrict p, const float *restrict g, const float *add,
                             float *restrict dz) {
    float dot = 0.0f;
    for (int64_t l = 0; l < L; l++) dot += p[l] * g[l];
    for (int64_t l = 0; l < L; l++) dz[l] = p[l] * (g[l] - dot) + (add ? add[l] : 0.0f);
}

/* One row's neurons in the backward of a step (the loop of step_backward_rows over H, in a function of its own so
 * that the restrict-qualified pointers let the compiler vectorise it). `carry`: dL/dc_t in (read when `carried`),
 * dL/dc_{t-1} out. */
INLINE void neurons_backward(int64_t H, const float *restrict dh, const float *restrict o,
                             const float *restrict tanh_c, const float *restrict cell, const float *restrict eff,
                             const float *restrict w_of, const float *restrict not_i, const float *restrict not_f,
                             float *restrict carry, int carried, float *restrict d_out, float *restrict d_cand,
                             float *restrict d_in, float *restrict d_forget, float *restrict s_in,
                             float *restrict s_forget, float *restrict s_bar) {
    for (int64_t j = 0; j < H; j++) {
        float d_tc = dh[j] * o[j], u = d_tc * tanh_c[j];
        d_out[j] = u * (1.0f - o[j]);
        float dc = d_tc - u * tanh_c[j] + (carried ? carry[j] : 0.0f); /* dL/dc_t */
        float c_hat = 0.5f * cell[j];
        float de_in = dc * c_hat, de_forget = 0.5f * dc * cell[H + j]; /* dL/d eff_in, dL/d eff_forget */
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

/* Step t's backward on rows [r_begin, r_end) of directions [k_begin, k_end); rows below `carry_rows` add dL/dc_t
 * from step t + 1. */
INLINE void step_backward_rows(const layer_grad *x, int64_t t, int64_t k_begin, int64_t k_end, int64_t r_begin,
                               int64_t r_end, int64_t carry_rows) {
    const int64_t H = x->hidden, L = x->levels, C = x->chunk;
    float *w_of = x->scratch, *s_in = w_of + H, *s_forget = s_in + H, *s_bar = s_forget + H;
    float *g = s_bar + H, *sums = g + 2 * L;
    for (int64_t k = k_begin; k < k_end; k++) {
        for (int64_t r = r_begin; r < r_end; r++) {
            const float *dh = AT(x->d_h, t, k, r), *a = AT(x->act, t, k, r), *tanh_c = AT(x->tanh_c, t, k, r);
            const float *cell = AT(x->cells, t, k, r), *eff = AT(x->eff, t, k, r);
            const float *omega = AT(x->omega, t, k, r), *m = AT(x->master, t, k, r), *p = AT(x->prob, t, k, r);
            float *d = AT(x->d_pre, t, k, r), *carry = AT(x->carry, t, k, r);
            const float *o = a + 2 * L, *not_i = o + 2 * H, *not_f = o + 3 * H;
            float *d_out = d + 2 * L, *d_cand = d_out + H, *d_in = d_out + 2 * H, *d_forget = d_out + 3 * H;
            const int carried = r < carry_rows;
            for (int64_t l = 0; l < L; l++)
                for (int64_t j = 0; j < C; j++) w_of[l * C + j] = omega[l];
            neurons_backward(H, dh, o, tanh_c, cell, eff, w_of, not_i, not_f, carry, carried, d_out, d_cand, d_in,
                             d_forget, s_in, s_forget, s_bar);
            /* per level: sums over its C neurons, then dL/d[i~, f~] (eff = [i~, f~] - i~ f~ (1 - [i, f])) */
            for (int64_t l = 0; l < L; l++) {
                float a_in = 0.0f, a_forget = 0.0f, a_bar = 0.0f;
                for (int64_t j = l * C; j < (l + 1) * C; j++) {
                    a_in += s_in[j];
                    a_forget += s_forget[j];
                    a_bar += s_bar[j];
                }
                sums[l] = a_in - m[L + l] * a_bar;         /* dL/d i~_l */
                sums[L + l] = a_forget - m[l] * a_bar;     /* dL/d f~_l */
            }
            /* dL/dp through the cumulative sums: f~ = cumsum(p_f), so dL/dp_f = reverse cumsum of dL/df~; paper
             * i~ = 1 - cumsum(p_i): minus its reverse cumsum; symmetric i~ = reverse cumsum of p_i: its cumsum */
            float run_f = 0.0f, run_i = 0.0f;
            for (int64_t l = L - 1; l >= 0; l--) {
                run_f += sums[L + l];
                g[L + l] = run_f;
            }
            if (x->symmetric) {
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
            const float *add = x->d_const.base ? AT(x->d_const, t, k, r) : NULL;
            softmax_backward(L, p, g, add, d);
            softmax_backward(L, p + L, g + L, add ? add + L : NULL, d + L);
        }
    }
}

/* Step t's backward on the first `rows` rows; rows below `carry_rows` add dL/dc_t from step t + 1. Returns 0. */
EXPORT CLONES int onlstm_step_backward(const layer_grad *x, int64_t t, int64_t rows, int64_t carry_rows) {
    step_backward_rows(x, t, 0, x->dirs, 0, rows, carry_rows);
    return 0;
}

/* ---- The whole time loop of a layer in one call (recurrent matrix products included) ----
 *
 * The recurrent product of each step goes through the Fortran BLAS sgemm_ that the caller passes as a function
 * pointer (compiled.py takes it from the BLAS linked into PyTorch, MKL in the x86 wheels), so this file needs no
 * BLAS headers or libraries at build time. Integer arguments are passed as pointers to zero-extended int64 values:
 * an LP64 BLAS reads their low 32 bits (this code runs only on little-endian machines, compiled.py checks), an ILP64
 * one all 64. compiled.py checks the function on a small product (onlstm_gemm_check) before using it.
 *
 * A call covers directions [k_begin, k_end) and rows [r_begin, r_end): rows of an RNN never interact, so two calls
 * on disjoint directions or rows can run at the same time on two threads (ctypes releases the GIL), each with its
 * own scratch. set_threads (MKL's mkl_set_num_threads_local, or NULL) sets the BLAS threads of the calling thread
 * for the call's products and is restored at the end. */

typedef void (*sgemm_fn)(const char *transa, const char *transb, const int64_t *m, const int64_t *n,
                         const int64_t *k, const float *alpha, const float *a, const int64_t *lda, const float *b,
                         const int64_t *ldb, const float *beta, float *c, const int64_t *ldc);
typedef int (*threads_fn)(int);

/* Must match _Loop in compiled.py field for field. */
typedef struct {
    sgemm_fn gemm;
    threads_fn set_threads; /* NULL: leave the BLAS threads as they are */
    int64_t threads;        /* BLAS threads for this call's products (with set_threads) */
    const float *weight;    /* recurrent weights, direction k at weight + k * weight_sk: forward [K, H, G] (scaled,
                             * transposed), backward [K, G, H], row-major */
    int64_t weight_sk;
    const int64_t *rows_at; /* [stop] rows running at each step (non-increasing) */
    int64_t stop;           /* steps with a running row */
    int64_t k_begin, k_end, r_begin, r_end;
    float *scratch;         /* this call's scratch (forward: 2 H + 2 L floats; backward: 4 H + 4 L) */
} loop;

/* row-major C[n, m] += A[n, kk] B with B = W^T (transpose_w: W row-major [m, kk]) or B = W (W row-major [kk, m]) */
INLINE void gemm_rows(const loop *l, int transpose_w, int64_t m, int64_t n, int64_t kk, const float *w,
                      const float *a, int64_t lda, float *c, int64_t ldc) {
    const float one = 1.0f;
    const int64_t ldw = transpose_w ? kk : m;
    /* column-major: C^T [m, n] += op(W) A^T, W seen column-major as W^T */
    l->gemm(transpose_w ? "T" : "N", "N", &m, &n, &kk, &one, w, &ldw, a, &lda, &one, c, &ldc);
}

INLINE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The forward of every step: for t > 0, act_t += h_{t-1} W (W the scaled recurrent weight transposed, [H, G]
 * row-major: MKL runs these products with few rows up to a sixth faster than from the [G, H] layout when W does not
 * fit in the cache; step 0's product, from a given initial state, is the caller's), then step t's element-wise
 * work. `even` and `odd` are
 * the contexts of even and odd steps (the same when the cell buffers are per step). Returns 0. */
EXPORT CLONES int onlstm_forward_loop(const layer *even, const layer *odd, const loop *l) {
    const int64_t H = even->hidden, G = 4 * H + 2 * even->levels;
    int before = l->set_threads ? l->set_threads((int)l->threads) : 0;
    for (int64_t t = 0; t < l->stop; t++) {
        const int64_t r_end = min64(l->rows_at[t], l->r_end);
        if (r_end <= l->r_begin) break; /* rows_at never grows: none of these rows runs again */
        layer x = *((t & 1) ? odd : even);
        x.scratch = l->scratch;
        for (int64_t k = l->k_begin; k < l->k_end; k++) {
            if (t > 0)
                gemm_rows(l, 0, G, r_end - l->r_begin, H, l->weight + k * l->weight_sk,
                          AT(x.h, t - 1, k, l->r_begin), x.h.sr, AT(x.act, t, k, l->r_begin), x.act.sr);
            step_rows(&x, t, k, k + 1, l->r_begin, r_end);
        }
    }
    if (l->set_threads) l->set_threads(before);
    return 0;
}

/* The backward of every step, last first: dL/dh_t += dL/d(pre-activations)_{t+1} W (W the unscaled recurrent weight
 * [G, H]) on the rows running at t + 1, then step t's element-wise backward. After the last step the first
 * `last_carry` rows start from the carry buffer's dL/dc. Returns 0. */
EXPORT CLONES int onlstm_backward_loop(const layer_grad *grad, const loop *l, int64_t last_carry) {
    const int64_t H = grad->hidden, G = 4 * H + 2 * grad->levels;
    int before = l->set_threads ? l->set_threads((int)l->threads) : 0;
    layer_grad x = *grad;
    x.scratch = l->scratch;
    for (int64_t t = l->stop - 1; t >= 0; t--) {
        const int64_t r_end = min64(l->rows_at[t], l->r_end);
        if (r_end <= l->r_begin) continue;
        const int64_t next = t + 1 < l->stop ? l->rows_at[t + 1] : last_carry;
        const int64_t next_end = t + 1 < l->stop ? min64(next, l->r_end) : 0;
        for (int64_t k = l->k_begin; k < l->k_end; k++) {
            if (next_end > l->r_begin)
                gemm_rows(l, 0, H, next_end - l->r_begin, G, l->weight + k * l->weight_sk,
                          AT(x.d_pre, t + 1, k, l->r_begin), x.d_pre.sr, AT(x.d_h, t, k, l->r_begin), x.d_h.sr);
            step_backward_rows(&x, t, k, k + 1, l->r_begin, r_end, next);
        }
    }
    if (l->set_threads) l->set_threads(before);
    return 0;
}

/* Checks a sgemm_ on a small product, both transpositions used above: 0 when it computes what it should. */
EXPORT int onlstm_gemm_check(sgemm_fn gemm) {
    float w[3 * 5], a[2 * 5], c[2 * 3], b[2 * 5];
    for (int i = 0; i < 15; i++) w[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 10; i++) a[i] = (float)(i % 4) - 1.5f;
    loop l;
    memset(&l, 0, sizeof l);
    l.gemm = gemm;
    /* c[2, 3] = 1 + a[2, 5] w^T, w [3, 5] */
    for (int i = 0; i < 6; i++) c[i] = 1.0f;
    gemm_rows(&l, 1, 3, 2, 5, w, a, 5, c, 3);
    for (int r = 0; r < 2; r++)
        for (int g = 0; g < 3; g++) {
            float want = 1.0f;
            for (int j = 0; j < 5; j++) want += a[r * 5 + j] * w[g * 5 + j];
            if (c[r * 3 + g] != want) return 1;
        }
    /* b[2, 5] = 2 + c[2, 3] w, w [3, 5] */
    for (int i = 0; i < 10; i++) b[i] = 2.0f;
    gemm_rows(&l, 0, 5, 2, 3, w, c, 3, b, 5);
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 5; j++) {
            float want = 2.0f;
            for (int g = 0; g < 3; g++) want += c[r * 3 + g] * w[g * 5 + j];
            if (b[r * 5 + j] != want) return 2;
        }
    return 0;
}

/* Random words for DropConnect masks: 16 xoshiro128++ generators (Blackman & Vigna, "Scrambled linear pseudorandom
 * number generators", 2021) side by side, word 16 k + l from generator l, so that the loop vectorises. `state` holds
 * the 16 generators' states as s0[16], s1[16], s2[16], s3[16] (seeded by the caller from torch's generator, which
 * keeps torch.manual_seed in charge) and is advanced in place. Writes `words` uint32 values to `out`. The 15-bit
 * lanes DropConnect reads are the low 15 bits of each 16-bit half; xoshiro128++'s scrambler makes every bit of its
 * output usable, unlike xoshiro128+'s low bits. About seven times faster than torch's CPU random_ (mt19937). */
#define XOSHIRO_STREAMS 16

INLINE uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

CLONES EXPORT void onlstm_random_words(uint32_t *restrict out, int64_t words, uint32_t *restrict state) {
    uint32_t *s0 = state, *s1 = state + XOSHIRO_STREAMS, *s2 = state + 2 * XOSHIRO_STREAMS,
             *s3 = state + 3 * XOSHIRO_STREAMS;
    for (int l = 0; l < XOSHIRO_STREAMS; l++)
        if ((s0[l] | s1[l] | s2[l] | s3[l]) == 0) /* the one state xoshiro cannot leave (chance 2^-128) */
            s0[l] = 1;
    uint32_t chunk[XOSHIRO_STREAMS];
    for (int64_t first = 0; first < words; first += XOSHIRO_STREAMS) {
        for (int l = 0; l < XOSHIRO_STREAMS; l++) {
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
        memcpy(out + first, chunk, (size_t)(left < XOSHIRO_STREAMS ? left : XOSHIRO_STREAMS) * sizeof(uint32_t));
    }
}

/* DropConnect: out[i] = in[i] * (kept ? scale : 0) over n floats, entry i kept when the low 15 bits of lanes[i]
 * are below `threshold` (1..32768). `lanes` are random 16-bit values (dropconnect.random_lanes: on the CPU the halves of
 * onlstm_random_words' words); dropconnect._masked computes the same with PyTorch operations. One pass replaces those
 * four (threshold, bool, product, scaling); the backward calls it again with the same lanes to mask the gradient,
 * so no mask is stored. */
CLONES EXPORT void onlstm_dropconnect(float *restrict out, const float *restrict in, const int16_t *restrict lanes,
                                      int64_t n, int32_t threshold, float scale) {
    for (int64_t i = 0; i < n; i++)
        out[i] = in[i] * (((int32_t)lanes[i] & 0x7FFF) < threshold ? scale : 0.0f);
}

/* A module object too, so that the file is a regular extension module for every build tool; Python code never
 * imports it (compiled.py opens it with ctypes). */
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_onlstm_step", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__onlstm_step(void) { return PyModule_Create(&module); }
