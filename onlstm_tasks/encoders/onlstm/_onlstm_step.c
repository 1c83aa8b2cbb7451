/* The element-wise work of one ON-LSTM time step, for every row and direction, in one call (float32, CPU).
 *
 * Optional: built by `pip install` when a C compiler is present, loaded through ctypes by compiled.py, and
 * replaced by the PyTorch back end (steps_torch.py) when absent. It computes the update written once in
 * equations.py (onlstm_update; its tests compare against it through the reference cell), in the regrouped form and
 * conventions described there, exactly as that back end does: the pre-activations come with doubled cell-candidate rows
 * and negated input/forget rows, and the cell buffers hold doubled cell states 2c, so one sigmoid gives o,
 * sigmoid(2g), 1 - i and 1 - f, and tanh(c) = 2 sigmoid(2c) - 1. onlstm_step replaces the dozen small tensor
 * operations that follow a step's recurrent matrix product; onlstm_forward_loop runs a layer's whole time loop,
 * that product included (see "The recurrent products" below).
 *
 * onlstm_step_backward does the same for the backward of a step (the hand-derived gradient that
 * steps_torch.backward_steps computes with PyTorch operations), and onlstm_backward_loop the whole backward loop;
 * the input projection and the three big products at the end stay in PyTorch (layer_pass.py, function.py).
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
#include <stdlib.h>
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
#define ONLSTM_STEP_ABI 10

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
    strided forget_distance; /* [1] 1 - mean(f~) over the levels (base NULL: not written) */
    strided input_distance;  /* [1] mean(i~) (base NULL: not written) */
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
            if (x->forget_distance.base) { /* the distances: means of i~ and f~ over the levels */
                float sum_i = 0.0f, sum_f = 0.0f;
                for (int64_t l = 0; l < L; l++) {
                    sum_i += m[l];
                    sum_f += m[L + l];
                }
                *AT(x->forget_distance, t, k, r) = 1.0f - sum_f / (float)L;
                *AT(x->input_distance, t, k, r) = sum_i / (float)L;
            }
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

/* ---- The recurrent products: a small matrix product on weights packed once per layer call ----
 *
 * Each step multiplies a few rows (the batch) by the same weights: act_t [B, G] = bias + x_t W_ih^T + h_{t-1} W^T
 * (scaled) forward, d_h_t [B, H] += d_pre_{t+1} [B, G] W backward, W [G, H] as PyTorch stores it. A general BLAS call
 * re-arranges (copies) panels of W at every such call, which costs more than it saves at these shapes
 * (scripts/benchmark_blas_gemm.py prints this product through PyTorch's BLAS and through the code below). Here W is
 * packed once per layer call (onlstm_pack) into panels of PANEL columns stored depth-major, so that a register block
 * of MR rows x PANEL columns reads one panel straight through, from the cache for every row block after the first
 * (at NER shapes the panels of both weights fit the L1 cache together). The accumulators are GCC/Clang vector types (12
 * vectors of 8 floats: the AVX2 + FMA clone keeps them in registers); other compilers get the same loops on arrays. */

#define PANEL 16
#define MR 6
#define KC 256          /* depth of a pass when the terms are deeper than FUSED_DEPTH together */
#define FUSED_DEPTH 512 /* panels of this depth take 32 KiB: read from the L2 cache by the blocks after the first
                         * (NER's second layer, 256 + 256 deep, was a little faster in one pass than in two) */

/* The [depth, n] matrix whose element (k, j) is w[k * sk + j * sn] times scale[j] (scale NULL: 1) into panels of
 * PANEL columns, panel p's element (k, j) at out[(p * depth + k) * PANEL + j]; the columns past n of the last panel
 * are zeros. `out` holds ceil(n / PANEL) * PANEL * depth floats. */
INLINE void pack_panels(const float *restrict w, int64_t depth, int64_t n, int64_t sk, int64_t sn,
                        const float *restrict scale, float *restrict out, int64_t p_begin, int64_t p_end) {
    for (int64_t p = p_begin; p < p_end; p++) {
        float *o = out + p * depth * PANEL;
        const int64_t first = p * PANEL, cols = n - first < PANEL ? n - first : PANEL;
        float factor[PANEL];
        for (int64_t j = 0; j < PANEL; j++) factor[j] = j < cols ? (scale ? scale[first + j] : 1.0f) : 0.0f;
        if (sn <= sk) { /* the source's rows run along j: read them in order */
            for (int64_t k = 0; k < depth; k++)
                for (int64_t j = 0; j < PANEL; j++)
                    o[k * PANEL + j] = j < cols ? w[k * sk + (first + j) * sn] * factor[j] : 0.0f;
        } else { /* its rows run along k (a transposed view) */
            for (int64_t j = 0; j < PANEL; j++) {
                const float *src = w + (first + j) * sn;
                if (j < cols)
                    for (int64_t k = 0; k < depth; k++) o[k * PANEL + j] = src[k * sk] * factor[j];
                else
                    for (int64_t k = 0; k < depth; k++) o[k * PANEL + j] = 0.0f;
            }
        }
    }
}

EXPORT CLONES void onlstm_pack(const float *restrict w, int64_t depth, int64_t n, int64_t sk, int64_t sn,
                               const float *restrict scale, float *restrict out) {
    pack_panels(w, depth, n, sk, sn, scale, out, 0, (n + PANEL - 1) / PANEL);
}

/* One matrix for onlstm_pack_team: the arguments of onlstm_pack. Must match _PackJob in compiled.py. */
typedef struct {
    const float *w;
    int64_t depth, n, sk, sn;
    const float *scale;
    float *out;
} pack_job;

/* Job j's panels in `parts` ranges: range r of job j packed by onlstm_pack_part(jobs, parts, j * parts + r). */
INLINE void pack_part(const pack_job *jobs, int64_t parts, int64_t i) {
    const pack_job *job = &jobs[i / parts];
    const int64_t r = i % parts, panels = (job->n + PANEL - 1) / PANEL;
    pack_panels(job->w, job->depth, job->n, job->sk, job->sn, job->scale, job->out, panels * r / parts,
                panels * (r + 1) / parts);
}

/* Two products into the same output, c = start + a1 B1 + a2 B2, each term given by one of these (a NULL: none) */
typedef struct {
    const float *a;      /* row i of the left factor at a + i * lda */
    int64_t lda, depth;
    const float *packed; /* the right factor [depth, n], packed by onlstm_pack: panel p at packed + p * stride */
    int64_t stride;      /* depth * PANEL, or more for a slice of a longer factor's depth */
} term;

#if (defined(__GNUC__) || defined(__clang__)) && !defined(ONLSTM_PLAIN_PRODUCT)
typedef float vec8 __attribute__((vector_size(32), aligned(4), may_alias));

/* acc[i] += a[i, :] b for one term's panel b (depth x PANEL, depth-major) and the block's rows of a copied k-major
 * (a[k rows + i]: one pointer and constant offsets; rows at a stride took a register each, some of which spilled,
 * and the extra loads from the stack slowed the NER loop by a few percent on two threads); with `fetch`, also asks
 * for the line of `next` (the next panel's slice) that lies as far ahead as the line of b read */
INLINE void block_term(const int rows, const int fetch, vec8 acc[MR][2], const float *a, int64_t depth,
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

/* One register block of `rows` rows and the columns [p PANEL, p PANEL + cols) of panel p: c = start + the terms,
 * start the row vector `init` (cols values) or, when NULL, what c holds; a1, a2 the block's rows of each term's left
 * factor copied k-major (see copy_rows). */
INLINE void block(const int rows, const int fetch, int64_t p, int64_t n, int64_t cols, const float *init,
                  const term *t1, const float *a1, const term *t2, const float *a2, float *c, int64_t ldc) {
    vec8 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = (vec8){0.0f};
    if (!init) /* c is read after the products: ask for its lines now (they are often far: acts written long ago) */
        for (int i = 0; i < rows; i++) {
            __builtin_prefetch(c + i * ldc, 1, 3);
            __builtin_prefetch(c + i * ldc + PANEL - 1, 1, 3);
        }
    const int64_t q = (p + 1) * PANEL < n ? p + 1 : p; /* the next panel, whose slices are fetched meanwhile */
    block_term(rows, fetch, acc, a1, t1->depth, t1->packed + p * t1->stride, t1->packed + q * t1->stride);
    if (t2->a) block_term(rows, fetch, acc, a2, t2->depth, t2->packed + p * t2->stride, t2->packed + q * t2->stride);
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        if (cols == PANEL) {
            const vec8 s0 = init ? *(const vec8 *)init : *(vec8 *)ci;
            const vec8 s1 = init ? *(const vec8 *)(init + 8) : *(vec8 *)(ci + 8);
            *(vec8 *)ci = s0 + acc[i][0];
            *(vec8 *)(ci + 8) = s1 + acc[i][1];
        } else {
            float sum[PANEL];
            memcpy(sum, &acc[i][0], sizeof acc[i][0]);
            memcpy(sum + 8, &acc[i][1], sizeof acc[i][1]);
            for (int64_t j = 0; j < cols; j++) ci[j] = (init ? init[j] : ci[j]) + sum[j];
        }
    }
}
#else
INLINE void block(const int rows, const int fetch, int64_t p, int64_t n, int64_t cols, const float *init,
                  const term *t1, const float *a1, const term *t2, const float *a2, float *c, int64_t ldc) {
    float acc[MR][PANEL];
    memset(acc, 0, sizeof acc);
    for (int which = 0; which < 2; which++) {
        const term *t = which ? t2 : t1;
        if (!t->a) continue;
        const float *a = which ? a2 : a1, *b = t->packed + p * t->stride;
        for (int64_t k = 0; k < t->depth; k++)
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < PANEL; j++) acc[i][j] += a[k * rows + i] * b[k * PANEL + j];
    }
    for (int i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) c[i * ldc + j] = (init ? init[j] : c[i * ldc + j]) + acc[i][j];
}
#endif

/* rows [r, r + rows) of t's left factor copied k-major: element (k, i) at out[k rows + i] (the plain loops; see
 * copy_rows below) */
INLINE void copy_rows_plain(const term *t, int64_t r, int64_t rows, int64_t k_begin, float *restrict out) {
    for (int64_t i = 0; i < rows; i++) {
        const float *a = t->a + (r + i) * t->lda;
        for (int64_t k = k_begin; k < t->depth; k++) out[k * rows + i] = a[k];
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && !defined(ONLSTM_PLAIN_PRODUCT)
typedef int32_t ivec8 __attribute__((vector_size(32)));

/* copy_rows for a block of `rows` (constant, at most 6) rows: 8 columns at a time, the block's rows loaded as vectors
 * (rows 6 and 7 repeat row 0) and transposed in registers (unpack, shuffle, swap of halves), then each column's
 * `rows` values stored together. The plain loops store one float at a time at a stride of `rows` floats, and took a
 * tenth of the backward loop at NER shapes (its products are 1088 deep: 35k floats copied per step). */
INLINE void copy_block(const int rows, const term *t, int64_t r, float *restrict out) {
    const int64_t depth = t->depth, lda = t->lda;
    const float *a = t->a + r * lda;
    int64_t k = 0;
    for (; k + 8 <= depth; k += 8) {
        vec8 v[8];
        for (int i = 0; i < 8; i++) v[i] = *(const vec8 *)(a + (i < rows ? i : 0) * lda + k);
        vec8 u[8], s[8];
        for (int i = 0; i < 8; i += 2) {
            u[i] = __builtin_shuffle(v[i], v[i + 1], (ivec8){0, 8, 1, 9, 4, 12, 5, 13});
            u[i + 1] = __builtin_shuffle(v[i], v[i + 1], (ivec8){2, 10, 3, 11, 6, 14, 7, 15});
        }
        for (int i = 0; i < 8; i += 4)
            for (int j = 0; j < 2; j++) {
                s[i + 2 * j] = __builtin_shuffle(u[i + j], u[i + j + 2], (ivec8){0, 1, 8, 9, 4, 5, 12, 13});
                s[i + 2 * j + 1] = __builtin_shuffle(u[i + j], u[i + j + 2], (ivec8){2, 3, 10, 11, 6, 7, 14, 15});
            }
        for (int j = 0; j < 4; j++) { /* column j from s[j] (rows 0-3) and s[j + 4] (rows 4-7), column j + 4 too */
            const vec8 lo = __builtin_shuffle(s[j], s[j + 4], (ivec8){0, 1, 2, 3, 8, 9, 10, 11});
            const vec8 hi = __builtin_shuffle(s[j], s[j + 4], (ivec8){4, 5, 6, 7, 12, 13, 14, 15});
            memcpy(out + (k + j) * rows, &lo, sizeof(float) * rows);
            memcpy(out + (k + j + 4) * rows, &hi, sizeof(float) * rows);
        }
    }
    const term rest = {t->a, lda, depth, NULL, 0};
    copy_rows_plain(&rest, r, rows, k, out);
}

INLINE void copy_rows(const term *t, int64_t r, int64_t rows, float *restrict out) {
    switch (rows) { /* constant row counts, so that each copy unrolls */
    case 6: copy_block(6, t, r, out); break;
    case 5: copy_block(5, t, r, out); break;
    case 4: copy_block(4, t, r, out); break;
    default: copy_rows_plain(t, r, rows, 0, out); break;
    }
}
#else
INLINE void copy_rows(const term *t, int64_t r, int64_t rows, float *restrict out) {
    copy_rows_plain(t, r, rows, 0, out);
}
#endif

/* One pass of product: per panel of columns, per block of rows, the block's sums stay in registers over both terms
 * and c is written once. The m rows are cut into ceil(m / MR) blocks of about equal rows (32: 6 6 5 5 5 5, not
 * 6 6 6 6 6 2): a block needs at least 5 rows (10 accumulators) to keep both FMA units busy through the FMA latency,
 * and a 2-row tail ran at about a third of the speed; `python scripts/benchmark_blas_gemm.py --batch 20` (20 rows, as
 * in the language model's batches: 6 6 6 2 before) went from 54 to 62-79 GFLOP/s (two runs). */
INLINE void product_pass(const int fetch, int64_t m, int64_t n, const float *init, const term *t1, const term *t2,
                         float *c, int64_t ldc, float *copy) {
    const int64_t blocks = (m + MR - 1) / MR;
    float *a1 = copy, *a2 = copy + m * t1->depth; /* block b's rows [r, r + rows): at a1 + r depth1, a2 + r depth2 */
    for (int64_t b = 0, r = 0; r < m; b++) {
        const int64_t rows = m / blocks + (b < m % blocks);
        copy_rows(t1, r, rows, a1 + r * t1->depth);
        if (t2->a) copy_rows(t2, r, rows, a2 + r * t2->depth);
        r += rows;
    }
    for (int64_t p = 0; p * PANEL < n; p++) {
        const int64_t cols = n - p * PANEL < PANEL ? n - p * PANEL : PANEL;
        const float *start = init ? init + p * PANEL : NULL;
        for (int64_t b = 0, r = 0; r < m; b++) {
            const int64_t rows = m / blocks + (b < m % blocks); /* blocks of about equal rows */
            float *cr = c + r * ldc + p * PANEL;
            switch (rows) { /* constant row counts, so that each block unrolls */
            case 6: block(6, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            case 5: block(5, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            case 4: block(4, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            case 3: block(3, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            case 2: block(2, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            default: block(1, fetch, p, n, cols, start, t1, a1 + r * t1->depth, t2, a2 + r * t2->depth, cr, ldc); break;
            }
            r += rows;
        }
    }
}

/* c[m, n] = start + t1 + t2 (rows of c at stride ldc): start the row vector `init` [n] in every row or, when NULL,
 * what c holds; t2.a NULL: no second term. In one pass when the terms are FUSED_DEPTH deep or less together (the
 * forward at NER shapes: 128 + 256 and 256 + 256 deep); otherwise in passes of KC deep, one term after the other, so
 * that each panel slice stays in the L1 cache for every row block (without them the backward's 1088-deep panels
 * took 60% longer at NER shapes). In passes of a term deeper than KC, the slices of one panel are far apart (a panel
 * holds the whole depth), which the hardware prefetcher does not follow, so each block also asks for the next panel's
 * slice line by line
 * (the language model's 1150-deep products: see scripts/benchmark_blas_gemm.py --batch 20 --hidden 1150 --chunk 10
 * before and after). A single pass reads its panels one after the other, which the hardware follows: asking there
 * too made the NER forward's product slower. */
INLINE void product(int64_t m, int64_t n, const float *init, const term *t1, const term *t2, float *c, int64_t ldc,
                    float *copy) {
    if (t1->depth + (t2->a ? t2->depth : 0) <= FUSED_DEPTH) {
        product_pass(0, m, n, init, t1, t2, c, ldc, copy);
        return;
    }
    const term none = {NULL, 0, 0, NULL, 0};
    for (int which = 0; which < 2; which++) {
        const term *t = which ? t2 : t1;
        if (!t->a) continue;
        for (int64_t k0 = 0; k0 < t->depth; k0 += KC) {
            const term slice = {t->a + k0, t->lda, t->depth - k0 < KC ? t->depth - k0 : KC, t->packed + k0 * PANEL,
                                t->stride};
            if (t->depth > KC) /* slices of a panel are apart: ask for the next panel's slice */
                product_pass(1, m, n, init, &slice, &none, c, ldc, copy);
            else /* one slice is the whole panel, and panels follow each other */
                product_pass(0, m, n, init, &slice, &none, c, ldc, copy);
            init = NULL; /* from the second pass on, add to what c holds */
        }
    }
}

/* c[m, n] = (init ? init : c) + a1 B1 + a2 B2, each B packed by onlstm_pack (a2 NULL: no second term); the tests
 * compare it with PyTorch's products. Returns 0, or 1 when out of memory. */
EXPORT CLONES int onlstm_product(int64_t m, int64_t n, const float *init, const float *a1, int64_t lda1,
                                 int64_t depth1, const float *packed1, const float *a2, int64_t lda2, int64_t depth2,
                                 const float *packed2, float *c, int64_t ldc) {
    const term t1 = {a1, lda1, depth1, packed1, depth1 * PANEL}, t2 = {a2, lda2, depth2, packed2, depth2 * PANEL};
    float *copy = malloc(sizeof(float) * (m > 0 ? m : 1) * FUSED_DEPTH);
    if (!copy) return 1;
    product(m, n, init, &t1, &t2, c, ldc, copy);
    free(copy);
    return 0;
}

/* ---- A layer's input projection in one product, where the loop does not do it step by step ----
 *
 * act [T B, G] = bias + x [T B, D] W_ih (scaled, packed) for every step's rows at once: the language model's layers,
 * whose input and recurrent weights together are too large to read again at every step. The rows go in chunks of
 * PROJECT_ROWS, whose slice of x (PROJECT_ROWS x KC floats) stays in the L2 cache while every panel passes by; the
 * chunks are the pieces that the threads of a team share. PyTorch's baddbmm (scaling the weight first) took longer
 * for the language model's 4830-gate layers and a little less for its 1680-gate one: see
 * scripts/benchmark_blas_gemm.py --projection. */

#define PROJECT_ROWS 120

INLINE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One direction's projection. Must match _ProjectJob in compiled.py field for field. */
typedef struct {
    const float *x;      /* row i at x + i * ldx */
    int64_t ldx, depth;  /* D */
    const float *packed; /* the [D, n] weights packed by onlstm_pack */
    const float *bias;   /* [n], added to every row */
    float *act;          /* row i at act + i * ld_act */
    int64_t ld_act, rows, n;
} project_job;

/* Chunk i of the projections of jobs[0..), each of ceil(rows / PROJECT_ROWS) chunks (every job has as many rows),
 * with `copy` room for PROJECT_ROWS x FUSED_DEPTH floats */
INLINE void project_part(const project_job *jobs, int64_t i, float *copy) {
    const int64_t chunks = (jobs[0].rows + PROJECT_ROWS - 1) / PROJECT_ROWS;
    const project_job *job = &jobs[i / chunks];
    const int64_t r0 = (i % chunks) * PROJECT_ROWS, rows = min64(PROJECT_ROWS, job->rows - r0);
    const term x = {job->x + r0 * job->ldx, job->ldx, job->depth, job->packed, job->depth * PANEL};
    const term none = {NULL, 0, 0, NULL, 0};
    product(rows, job->n, job->bias, &x, &none, job->act + r0 * job->ld_act, job->ld_act, copy);
}

/* chunks [begin, end) of jobs[0..count) in turn; returns 0, or 1 when out of memory */
EXPORT CLONES int onlstm_project_parts(const project_job *jobs, int64_t begin, int64_t end) {
    float *copy = malloc(sizeof(float) * PROJECT_ROWS * FUSED_DEPTH);
    if (!copy) return 1;
    for (int64_t i = begin; i < end; i++) project_part(jobs, i, copy);
    free(copy);
    return 0;
}

/* every chunk of jobs[0..count) in turn (one thread); returns 0, or 1 when out of memory */
EXPORT int onlstm_project(const project_job *jobs, int64_t count) {
    return onlstm_project_parts(jobs, 0, count * ((jobs[0].rows + PROJECT_ROWS - 1) / PROJECT_ROWS));
}

/* ---- The whole time loop of a layer in one call (recurrent matrix products included) ----
 *
 * A call covers directions [k_begin, k_end) and rows [r_begin, r_end): rows of an RNN never interact, so calls on
 * disjoint directions or rows run at the same time on several threads (ctypes releases the GIL), each with its own
 * scratch, and never wait for each other. */

/* Must match _Loop in compiled.py field for field. */
typedef struct {
    const float *weight;    /* recurrent weights packed by onlstm_pack, direction k at weight + k * weight_sk:
                             * forward the scaled [H, G] (h W), backward the [G, H] of PyTorch (d_pre W) */
    int64_t weight_sk;
    /* forward only: the input projection of each step, act_t = bias + x_t W_ih (+ the recurrent product) */
    strided x;              /* [D] inputs, zero at padded steps; base NULL: act holds bias + x_t W_ih already */
    int64_t input_size;     /* D */
    const float *weight_ih; /* the scaled [D, G] input weights, packed; direction k at weight_ih + k * weight_ih_sk */
    int64_t weight_ih_sk;
    const float *bias;      /* [K, G] the scaled summed biases */
    strided h0;             /* [H] the initial state h_{-1} (st = 0); base NULL: zeros (step 0 has no product) */
    const int64_t *rows_at; /* [stop] rows running at each step (non-increasing) */
    int64_t stop;           /* steps with a running row */
    int64_t k_begin, k_end, r_begin, r_end;
    float *scratch;         /* this call's scratch (forward: 2 H + 2 L floats; backward: 4 H + 4 L) */
    float *copy;            /* room for (r_end - r_begin) x FUSED_DEPTH floats: the products' rows copied k-major */
    float *d_bias;          /* backward only: [K, G], direction k's dL/d(pre-activations) summed over the call's rows
                             * and steps is added to row k (the bias gradient; NULL: not summed) */
} loop;

/* The forward of every step: act_t = bias + x_t W_ih + h_{t-1} W (W the scaled recurrent weight transposed,
 * [H, G]; h_{-1} from h0, or no product), then step t's element-wise work. `even` and `odd` are the contexts of
 * even and odd steps (the same when the cell buffers are per step). The input projection is done here, step by step
 * on the rows that run, rather than in one large product beforehand: it then shares the threads of the loop's pieces
 * (a large product beforehand is one more serial phase) and skips padded positions for free. Returns 0. */
EXPORT CLONES int onlstm_forward_loop(const layer *even, const layer *odd, const loop *l) {
    const int64_t H = even->hidden, G = 4 * H + 2 * even->levels, D = l->input_size, r0 = l->r_begin;
    for (int64_t t = 0; t < l->stop; t++) {
        const int64_t r_end = min64(l->rows_at[t], l->r_end), rows = r_end - r0;
        if (rows <= 0) break; /* rows_at never grows: none of these rows runs again */
        layer x = *((t & 1) ? odd : even);
        x.scratch = l->scratch;
        for (int64_t k = l->k_begin; k < l->k_end; k++) {
            term input = {NULL, 0, D, l->weight_ih + k * l->weight_ih_sk, D * PANEL};
            term recurrent = {NULL, 0, H, l->weight + k * l->weight_sk, H * PANEL};
            if (l->x.base) {
                input.a = AT(l->x, t, k, r0);
                input.lda = l->x.sr;
            }
            if (t > 0) {
                recurrent.a = AT(x.h, t - 1, k, r0);
                recurrent.lda = x.h.sr;
            } else if (l->h0.base) {
                recurrent.a = AT(l->h0, 0, k, r0);
                recurrent.lda = l->h0.sr;
            }
            float *act = AT(x.act, t, k, r0);
            if (input.a)
                product(rows, G, l->bias + k * G, &input, &recurrent, act, x.act.sr, l->copy);
            else if (recurrent.a) /* act holds bias + x_t W_ih already */
                product(rows, G, NULL, &recurrent, &input, act, x.act.sr, l->copy);
            step_rows(&x, t, k, k + 1, r0, r_end);
        }
    }
    return 0;
}

/* sum[0..n) += row[0..n) */
INLINE void add_row(int64_t n, const float *restrict row, float *restrict sum) {
    for (int64_t j = 0; j < n; j++) sum[j] += row[j];
}

/* The backward of every step, last first: dL/dh_t += dL/d(pre-activations)_{t+1} W (W the unscaled recurrent
 * weight [G, H]) on the rows running at t + 1, then step t's element-wise backward, whose rows are then added to
 * the bias gradient while they are still in the cache (a pass over all of dL/d(pre-activations) afterwards read
 * them back from memory). After the last step the first `last_carry` rows start from the carry buffer's dL/dc.
 * Returns 0. */
EXPORT CLONES int onlstm_backward_loop(const layer_grad *grad, const loop *l, int64_t last_carry) {
    const int64_t H = grad->hidden, G = 4 * H + 2 * grad->levels;
    layer_grad x = *grad;
    x.scratch = l->scratch;
    for (int64_t t = l->stop - 1; t >= 0; t--) {
        const int64_t r_end = min64(l->rows_at[t], l->r_end);
        if (r_end <= l->r_begin) continue;
        const int64_t next = t + 1 < l->stop ? l->rows_at[t + 1] : last_carry;
        const int64_t next_end = t + 1 < l->stop ? min64(next, l->r_end) : 0;
        for (int64_t k = l->k_begin; k < l->k_end; k++) {
            if (next_end > l->r_begin) {
                const term recurrent = {AT(x.d_pre, t + 1, k, l->r_begin), x.d_pre.sr, G, l->weight + k * l->weight_sk,
                                        G * PANEL};
                const term none = {NULL, 0, 0, NULL, 0};
                product(next_end - l->r_begin, H, NULL, &recurrent, &none, AT(x.d_h, t, k, l->r_begin), x.d_h.sr,
                        l->copy);
            }
            step_backward_rows(&x, t, k, k + 1, l->r_begin, r_end, next);
            if (l->d_bias)
                for (int64_t r = l->r_begin; r < r_end; r++) add_row(G, AT(x.d_pre, t, k, r), l->d_bias + k * G);
        }
    }
    return 0;
}

/* ---- Pieces of a layer's loop at the same time on the OpenMP threads PyTorch already runs ----
 *
 * After a parallel PyTorch operation (the input projection) its OpenMP worker threads keep spinning for a while; a
 * thread of our own started then shares a core with one of them (measured: no gain from a second thread at NER
 * shapes). So the pieces run on those very workers: compiled.py passes GOMP_parallel (the entry point of
 * `#pragma omp parallel` in GCC's OpenMP runtime, which LLVM's exports too) of the runtime PyTorch loaded, and each
 * team member takes the next piece not yet taken until none is left (so a team of any size, one included, runs
 * every piece once). Needs GCC/Clang atomics; elsewhere the team calls return 1 and compiled.py uses a thread pool. */

typedef void (*parallel_fn)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);

typedef struct {
    const layer *even, *odd;
    const layer_grad *grad;
    const loop *loops;
    int64_t count, last_carry, next;
} team;

#if defined(__GNUC__) || defined(__clang__)
/* the next piece not yet taken by a member of the team */
INLINE int64_t take(int64_t *next) { return __atomic_fetch_add(next, 1, __ATOMIC_RELAXED); }

static void forward_member(void *data) {
    team *t = (team *)data;
    for (int64_t i = take(&t->next); i < t->count; i = take(&t->next))
        onlstm_forward_loop(t->even, t->odd, &t->loops[i]);
}

static void backward_member(void *data) {
    team *t = (team *)data;
    for (int64_t i = take(&t->next); i < t->count; i = take(&t->next))
        onlstm_backward_loop(t->grad, &t->loops[i], t->last_carry);
}

/* onlstm_forward_loop on each of loops[0..count) at the same time, through `parallel`. Returns 0. */
EXPORT int onlstm_forward_team(parallel_fn parallel, const layer *even, const layer *odd, const loop *loops,
                               int64_t count) {
    team t = {even, odd, NULL, loops, count, 0, 0};
    parallel(forward_member, &t, (unsigned)count, 0);
    return 0;
}

typedef struct {
    const pack_job *jobs;
    int64_t count, parts, next;
} pack_team;

static void pack_member(void *data) {
    pack_team *t = (pack_team *)data;
    for (int64_t i = take(&t->next); i < t->count * t->parts; i = take(&t->next)) pack_part(t->jobs, t->parts, i);
}

/* onlstm_pack on each of jobs[0..count), each cut into `threads` ranges of panels, on a team of `threads` through
 * `parallel`. Returns 0. */
EXPORT int onlstm_pack_team(parallel_fn parallel, const pack_job *jobs, int64_t count, int64_t threads) {
    pack_team t = {jobs, count, threads, 0};
    parallel(pack_member, &t, (unsigned)threads, 0);
    return 0;
}

typedef struct {
    const project_job *jobs;
    int64_t pieces, next, failed;
} project_team;

static void project_member(void *data) {
    project_team *t = (project_team *)data;
    for (int64_t i = take(&t->next); i < t->pieces; i = take(&t->next))
        if (onlstm_project_parts(t->jobs, i, i + 1)) __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
}

/* onlstm_project with the chunks shared by a team of `threads` through `parallel`. Returns 0, or 2 when out of
 * memory. */
EXPORT int onlstm_project_team(parallel_fn parallel, const project_job *jobs, int64_t count, int64_t threads) {
    project_team t = {jobs, count * ((jobs[0].rows + PROJECT_ROWS - 1) / PROJECT_ROWS), 0, 0};
    parallel(project_member, &t, (unsigned)threads, 0);
    return t.failed ? 2 : 0;
}

/* onlstm_backward_loop on each of loops[0..count) at the same time, through `parallel`. Returns 0. */
EXPORT int onlstm_backward_team(parallel_fn parallel, const layer_grad *grad, const loop *loops, int64_t count,
                                int64_t last_carry) {
    team t = {NULL, NULL, grad, loops, count, last_carry, 0};
    parallel(backward_member, &t, (unsigned)count, 0);
    return 0;
}
#else
EXPORT int onlstm_forward_team(parallel_fn parallel, const layer *even, const layer *odd, const loop *loops,
                               int64_t count) {
    return 1;
}

EXPORT int onlstm_backward_team(parallel_fn parallel, const layer_grad *grad, const loop *loops, int64_t count,
                                int64_t last_carry) {
    return 1;
}

EXPORT int onlstm_pack_team(parallel_fn parallel, const pack_job *jobs, int64_t count, int64_t threads) { return 1; }

EXPORT int onlstm_project_team(parallel_fn parallel, const project_job *jobs, int64_t count, int64_t threads) {
    return 1;
}
#endif

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
