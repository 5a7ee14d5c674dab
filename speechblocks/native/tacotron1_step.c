/* The free-running Tacotron-1 decoder loop (keithito/tacotron, mimic2) in one call: every step of a batch at
 * inference -- the decoder pre-net, the attention GRU, the content-only Bahdanau attention (mimic2: plus the location
 * term of the previous step's alignments), cell_0's projection of [h_att, context], the two residual GRUs, the
 * projection to r frames -- until every row has had a step whose num_mels * r outputs are all exactly 0.0, or
 * max_iters steps.  The maths of torch_layers.tacotron1_decoder.decoder_step (and so of the TF1 graph), in float32;
 * only the order of each sum differs from the library kernels.
 *
 * Why: a Tacotron-1 step is small (~7 MiB of weights at keithito's sizes, ~4 M multiply-adds at batch 1) and made of
 * ~40 small ops; the frameworks' loops spend most of a step launching them.  Here the whole loop runs in one OpenMP
 * parallel region (the process's OpenMP runtime: torch's, loaded first), the threads splitting every product's
 * outputs between barriers (t1_wait: a spin barrier), no Python between the steps.  Each output is computed by one
 * thread in one order and every elementwise function runs through the same code wherever it lies (t1_map), so any
 * thread count gives the same bits.
 *
 * Both frameworks' layouts are read in place: torch's (out, in) Linear weights (cols 0) or Keras' (in, out) kernels
 * (cols 1), every kernel of a decoder in the same one.  The GRUs are TF1's GRUCell: [r, u] = sigmoid([x, h] Wg + bg),
 * c = tanh([x, r h] Wc + bc), h' = u h + (1 - u) c.  Built on first use by speechblocks/native/_build.py;
 * tests/test_native_tacotron1_step*.py hold it to each framework's loop.
 */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "common.h"
#include "vector_maths.h"

/* Y[b, r] = W[r, :] . X[b, :] + bias[r] for rows [r0, r1) of a row-major (rows, n) W, every batch row b (each weight
 * row read once for the batch); bias may be NULL */
static void t1_rows(const float *W, const float *bias, const float *X, int ldx, int n, int r0, int r1, float *Y,
                    int ldy, int batch) {
    for (int r = r0; r < r1; r++) {
        const float *w = W + (size_t)r * n;
        for (int b = 0; b < batch; b++) {
            const float *x = X + (size_t)b * ldx;
            float acc = 0.f;
#pragma omp simd reduction(+ : acc)
            for (int i = 0; i < n; i++) acc += w[i] * x[i];
            Y[(size_t)b * ldy + r] = bias ? acc + bias[r] : acc;
        }
    }
}

/* Y[b, c] = X[b, :] . W[:, c] + bias[c] for columns [c0, c1) of a row-major (n, cols) W (a Keras kernel), every
 * batch row b; bias may be NULL */
static void t1_cols(const float *W, const float *bias, const float *X, int ldx, int n, int cols, int c0, int c1,
                    float *Y, int ldy, int batch) {
    if (c1 <= c0) return;
    for (int b = 0; b < batch; b++)
        for (int c = c0; c < c1; c++) Y[(size_t)b * ldy + c] = 0.f;
    for (int i = 0; i < n; i++) {
        const float *w = W + (size_t)i * cols;
        for (int b = 0; b < batch; b++) {
            const float xi = X[(size_t)b * ldx + i];
            float *y = Y + (size_t)b * ldy;
#pragma omp simd
            for (int c = c0; c < c1; c++) y[c] += xi * w[c];
        }
    }
    if (bias)
        for (int b = 0; b < batch; b++)
            for (int c = c0; c < c1; c++) Y[(size_t)b * ldy + c] += bias[c];
}

/* outputs [lo, hi) of a dense layer (n inputs, n_out outputs) in either layout */
static void t1_dense(int cols, const float *W, const float *bias, const float *X, int ldx, int n, int n_out, int lo,
                     int hi, float *Y, int ldy, int batch) {
    if (cols)
        t1_cols(W, bias, X, ldx, n, n_out, lo, hi, Y, ldy, batch);
    else
        t1_rows(W, bias, X, ldx, n, lo, hi, Y, ldy, batch);
}

/* x[i] = f(x[i]) over n floats (f SB_EXP or SB_TANH), every element through the same function wherever it lies
 * (glibc's vector function, the tail padded into one more vector; else the scalar one): the bits do not depend on
 * how the threads split the outputs */
static void t1_map(float *x, int n, int f) {
#if defined(SB_VW)
    const int whole = n - n % SB_VW;
    v_map(x, whole, f);
    if (whole < n) {
        float tail[SB_VW] = {0.f};
        memcpy(tail, x + whole, sizeof(float) * (n - whole));
        v_map(tail, SB_VW, f);
        memcpy(x + whole, tail, sizeof(float) * (n - whole));
    }
#else
    v_map(x, n, f);
#endif
}

/* x[i] = 1 / (1 + exp(-x[i])), as v_sigmoid, through t1_map */
static void t1_sigmoid(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = -x[i];
    t1_map(x, n, SB_EXP);
    for (int i = 0; i < n; i++) x[i] = 1.0f / (1.0f + x[i]);
}

/* The loop's barrier (~18 a step): a sense-reversing spin barrier that yields the CPU after a while, not OpenMP's.
 * libgomp's barrier sleeps on a futex once it throttles its spinning (more OpenMP threads in the process than CPUs,
 * as after torch's inter-op fork), and a step of ~0.1 ms cannot pay a wake-up per barrier. */
typedef struct {
    atomic_int arrived, sense;
} t1_barrier;

typedef struct {
    t1_barrier *shared;
    int threads, sense;  /* this thread's copy of the sense it waits for */
} t1_sync;

static void t1_wait(t1_sync *y) {
    if (y->threads == 1) return;
    const int sense = !y->sense;
    y->sense = sense;
    t1_barrier *b = y->shared;
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == y->threads - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->sense, sense, memory_order_release);
        return;
    }
    for (int spins = 0; atomic_load_explicit(&b->sense, memory_order_acquire) != sense;) {
        if (++spins == 1 << 14) {
            sched_yield();  /* a thread the OS took off its CPU gets it back */
            spins = 0;
        } else {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

/* The weights and constants of a decoder and one call's attention memory (pointers into the frameworks' tensors,
 * float32, C-contiguous; the Python side checks every shape: speechblocks/native/tacotron1_loop.py). */
typedef struct {
    int batch, num_mels, frame_size;   /* frame_size = num_mels * r: a step's outputs */
    int max_time, memory_size;         /* T_in, E */
    int att_units, dec_units;          /* A (attention GRU, query, keys), D (cell_0 projection, GRU 1 and 2) */
    int cols;                          /* 0: torch's (out, in) rows; 1: Keras' (in, out) columns (every kernel) */
    int prenet_outside;                /* 1: concat(prenet(x), context) (keithito-20180906); 0: prenet(concat(x,
                                        * context)) (keithito-20170720, mimic2) */
    int prenet_layers;
    int prenet_sizes[SB_MAX_LAYERS];
    const float *prenet_w[SB_MAX_LAYERS], *prenet_b[SB_MAX_LAYERS];
    const float *gates_w[3], *gates_b[3];  /* the attention GRU, GRU 1, GRU 2: (2u, n + u) or (n + u, 2u); (2u,) */
    const float *cand_w[3], *cand_b[3];    /* (u, n + u) or (n + u, u); (u,) */
    const float *query_w;              /* (A, A): the query layer (no bias) */
    const float *v_a;                  /* (A,) */
    const float *location_wt;          /* (kernel, A): mimic2's location convolution and layer folded, or NULL */
    int kernel, pad_before;            /* its width and TF 'same' padding before */
    const float *keys;                 /* (batch, T_in, A): memory @ memory_layer */
    const float *values;               /* (batch, T_in, E): the memory */
    const float *score_bias;           /* (batch, T_in) 0 / -inf past each length (mask_memory), or NULL */
    const float *cell0_w, *cell0_b;    /* (D, A + E) or (A + E, D); (D,) */
    const float *out_w, *out_b;        /* (frame_size, D) or (D, frame_size); (frame_size,) */
    int threads;
} sb_tacotron1_decoder;

const sb_layout_entry *sb_tacotron1_decoder_layout(void) {
    static const sb_layout_entry table[] = {
        SB_FIELD(sb_tacotron1_decoder, batch), SB_FIELD(sb_tacotron1_decoder, num_mels),
        SB_FIELD(sb_tacotron1_decoder, frame_size), SB_FIELD(sb_tacotron1_decoder, max_time),
        SB_FIELD(sb_tacotron1_decoder, memory_size), SB_FIELD(sb_tacotron1_decoder, att_units),
        SB_FIELD(sb_tacotron1_decoder, dec_units), SB_FIELD(sb_tacotron1_decoder, cols),
        SB_FIELD(sb_tacotron1_decoder, prenet_outside), SB_FIELD(sb_tacotron1_decoder, prenet_layers),
        SB_FIELD(sb_tacotron1_decoder, prenet_sizes), SB_FIELD(sb_tacotron1_decoder, prenet_w),
        SB_FIELD(sb_tacotron1_decoder, prenet_b), SB_FIELD(sb_tacotron1_decoder, gates_w),
        SB_FIELD(sb_tacotron1_decoder, gates_b), SB_FIELD(sb_tacotron1_decoder, cand_w),
        SB_FIELD(sb_tacotron1_decoder, cand_b), SB_FIELD(sb_tacotron1_decoder, query_w),
        SB_FIELD(sb_tacotron1_decoder, v_a), SB_FIELD(sb_tacotron1_decoder, location_wt),
        SB_FIELD(sb_tacotron1_decoder, kernel), SB_FIELD(sb_tacotron1_decoder, pad_before),
        SB_FIELD(sb_tacotron1_decoder, keys), SB_FIELD(sb_tacotron1_decoder, values),
        SB_FIELD(sb_tacotron1_decoder, score_bias), SB_FIELD(sb_tacotron1_decoder, cell0_w),
        SB_FIELD(sb_tacotron1_decoder, cell0_b), SB_FIELD(sb_tacotron1_decoder, out_w),
        SB_FIELD(sb_tacotron1_decoder, out_b), SB_FIELD(sb_tacotron1_decoder, threads),
        SB_END(sb_tacotron1_decoder)};
    return table;
}

/* One TF1 GRUCell step of every batch row, run by every thread of the region (three barriers).  xh: (batch, n + u)
 * [x, h], the state h in its last u columns, replaced by h'; xr: (batch, n + u) scratch for [x, r h]; g: (batch, 2u)
 * scratch, c: (batch, u) scratch.  Also to[b, j] = h'[b, j] (+ add[b, j] when add is not NULL: the residual sums). */
static void t1_gru(const sb_tacotron1_decoder *m, int k, int n, int u, float *xh, float *xr, float *g, float *c,
                   float *to, int ld_to, const float *add, int ld_add, int t, int nt, t1_sync *y) {
    const int B = m->batch, ld = n + u;
    int lo, hi;
    sb_share(2 * u, t, nt, 16, &lo, &hi);
    t1_dense(m->cols, m->gates_w[k], m->gates_b[k], xh, ld, ld, 2 * u, lo, hi, g, 2 * u, B);
    t1_wait(y);
    sb_share(u, t, nt, 16, &lo, &hi);
    for (int b = 0; b < B; b++) {
        float *gb = g + (size_t)b * 2 * u;
        if (hi > lo) {
            t1_sigmoid(gb + lo, hi - lo);
            t1_sigmoid(gb + u + lo, hi - lo);
        }
        const float *h = xh + (size_t)b * ld + n;
        float *rh = xr + (size_t)b * ld + n;
        for (int j = lo; j < hi; j++) rh[j] = gb[j] * h[j];
    }
    {
        int x0, x1;
        sb_share(n, t, nt, 16, &x0, &x1);
        for (int b = 0; b < B; b++)
            if (x1 > x0) memcpy(xr + (size_t)b * ld + x0, xh + (size_t)b * ld + x0, sizeof(float) * (x1 - x0));
    }
    t1_wait(y);
    t1_dense(m->cols, m->cand_w[k], m->cand_b[k], xr, ld, ld, u, lo, hi, c, u, B);
    for (int b = 0; b < B; b++) {
        float *cb = c + (size_t)b * u;
        if (hi > lo) t1_map(cb + lo, hi - lo, SB_TANH);
        const float *ug = g + (size_t)b * 2 * u + u;
        float *h = xh + (size_t)b * ld + n;
        float *out = to + (size_t)b * ld_to;
        const float *plus = add ? add + (size_t)b * ld_add : NULL;
        for (int j = lo; j < hi; j++) {
            const float hn = ug[j] * h[j] + (1.0f - ug[j]) * cb[j];
            h[j] = hn;
            out[j] = plus ? plus[j] + hn : hn;
        }
    }
    t1_wait(y);
}

/* The loop.  frames: (batch, max_iters, frame_size), alignments: (batch, max_iters, T_in), both written for the
 * steps run (*steps of them).  Returns 0, or 1 when the scratch memory cannot be allocated (nothing run). */
int sb_tacotron1_decode(const sb_tacotron1_decoder *m, int max_iters, float *frames, float *alignments, int *steps) {
    const int B = m->batch, M = m->num_mels, F = m->frame_size, T = m->max_time, E = m->memory_size;
    const int A = m->att_units, D = m->dec_units, P = m->prenet_sizes[m->prenet_layers - 1];
    const int pin = m->prenet_outside ? M : M + E;  /* the pre-net's input width */
    const int n0 = m->prenet_outside ? P + E : P;   /* the attention GRU's input width */
    int pmax = 1;
    for (int k = 0; k < m->prenet_layers; k++) pmax = m->prenet_sizes[k] > pmax ? m->prenet_sizes[k] : pmax;
    const int gw = 2 * (A > D ? A : D);
    /* every buffer zeroed: the GO frame, the zero state, the zero previous alignments of the first step */
    const size_t sizes[] = {
        (size_t)B * pin,           /* 0 pre_in: [frame, context] or [frame] */
        (size_t)2 * B * pmax,      /* 1 the pre-net's hidden layers */
        (size_t)B * (n0 + A),      /* 2 xh0: [cell input, h_att] */
        (size_t)B * (n0 + A),      /* 3 xr0 */
        (size_t)B * gw,            /* 4 gates */
        (size_t)B * (gw / 2),      /* 5 candidate */
        (size_t)B * A,             /* 6 processed query */
        (size_t)B * T * A,         /* 7 the tanh arguments */
        (size_t)B * (A + E),       /* 8 hc: [h_att, context] */
        (size_t)B * 2 * D,         /* 9 xh1: [out0, h1] */
        (size_t)B * 2 * D,         /* 10 xr1 */
        (size_t)B * 2 * D,         /* 11 xh2: [out1, h2] */
        (size_t)B * 2 * D,         /* 12 xr2 */
        (size_t)B * D,             /* 13 out2 */
        (size_t)B * T,             /* 14 the first step's previous alignments (zeros) */
    };
    enum { NBUF = sizeof(sizes) / sizeof(sizes[0]) };
    float *buf[NBUF];
    int failed = 0;
    for (int i = 0; i < NBUF; i++) {
        buf[i] = calloc(sizes[i] ? sizes[i] : 1, sizeof(float));
        failed |= buf[i] == NULL;
    }
    int *finished = calloc((size_t)B, sizeof(int));
    failed |= finished == NULL;
    if (failed) {
        for (int i = 0; i < NBUF; i++) free(buf[i]);
        free(finished);
        *steps = 0;
        return 1;
    }
    float *pre_in = buf[0], *hidden = buf[1], *xh0 = buf[2], *xr0 = buf[3], *g = buf[4], *cand = buf[5];
    float *query = buf[6], *energy = buf[7], *hc = buf[8], *xh1 = buf[9], *xr1 = buf[10], *xh2 = buf[11];
    float *xr2 = buf[12], *out2 = buf[13], *zeros = buf[14];
    int done = 0, ran = 0;
    t1_barrier barrier;
    atomic_init(&barrier.arrived, 0);
    atomic_init(&barrier.sense, 0);
    const size_t fstride = (size_t)max_iters * F, astride = (size_t)max_iters * T;
#pragma omp parallel num_threads(m->threads)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        t1_sync sync = {&barrier, nt, 0}, *y = &sync;
        int lo, hi;
        for (int step = 0; step < max_iters; step++) {
            /* the pre-net: dense -> relu (keeping NaN), no dropout at inference; the last layer writes the
             * attention GRU's input */
            const float *px = pre_in;
            int n_in = pin, ldx = pin;
            for (int k = 0; k < m->prenet_layers; k++) {
                const int n_out = m->prenet_sizes[k];
                const int last = k == m->prenet_layers - 1;
                float *py = last ? xh0 : hidden + (size_t)(k % 2) * B * pmax;
                const int ldy = last ? n0 + A : pmax;
                sb_share(n_out, t, nt, 16, &lo, &hi);
                t1_dense(m->cols, m->prenet_w[k], m->prenet_b[k], px, ldx, n_in, n_out, lo, hi, py, ldy, B);
                for (int b = 0; b < B; b++)
                    for (int j = lo; j < hi; j++) {
                        const float y = py[(size_t)b * ldy + j];
                        py[(size_t)b * ldy + j] = y > 0.f ? y : (y == y ? 0.f : y);
                    }
                px = py;
                n_in = n_out;
                ldx = ldy;
                t1_wait(y);
            }
            /* the attention GRU; h_att also to hc's first A columns */
            t1_gru(m, 0, n0, A, xh0, xr0, g, cand, hc, A + E, NULL, 0, t, nt, y);
            /* the processed query */
            sb_share(A, t, nt, 16, &lo, &hi);
            t1_dense(m->cols, m->query_w, NULL, hc, A + E, A, A, lo, hi, query, A, B);
            t1_wait(y);
            /* the energies v . tanh(keys + location + query) over this thread's share of (row, memory step) */
            sb_share(B * T, t, nt, 4, &lo, &hi);
            for (int p = lo; p < hi; p++) {
                const int b = p / T, i = p % T;
                float *e = energy + (size_t)p * A;
                const float *ki = m->keys + (size_t)p * A, *q = query + (size_t)b * A;
                if (m->location_wt) {
                    const float *prev = step ? alignments + (size_t)b * astride + (size_t)(step - 1) * T
                                             : zeros + (size_t)b * T;
                    for (int a = 0; a < A; a++) e[a] = 0.f;
                    for (int kk = 0; kk < m->kernel; kk++) {  /* 'same' convolution of the previous alignments */
                        const int src = i + kk - m->pad_before;
                        if (src < 0 || src >= T) continue;
                        const float sv = prev[src];
                        const float *lw = m->location_wt + (size_t)kk * A;
#pragma omp simd
                        for (int a = 0; a < A; a++) e[a] += lw[a] * sv;
                    }
#pragma omp simd
                    for (int a = 0; a < A; a++) e[a] = (ki[a] + e[a]) + q[a];
                } else {
#pragma omp simd
                    for (int a = 0; a < A; a++) e[a] = ki[a] + q[a];
                }
            }
            if (hi > lo) t1_map(energy + (size_t)lo * A, (hi - lo) * A, SB_TANH);
            for (int p = lo; p < hi; p++) {
                const int b = p / T, i = p % T;
                const float *e = energy + (size_t)p * A;
                float acc = 0.f;
#pragma omp simd reduction(+ : acc)
                for (int a = 0; a < A; a++) acc += m->v_a[a] * e[a];
                if (m->score_bias && m->score_bias[p] < 0.f) acc = m->score_bias[p];
                alignments[(size_t)b * astride + (size_t)step * T + i] = acc;  /* normalised below */
            }
            t1_wait(y);
            /* softmax, a row a thread */
            sb_share(B, t, nt, 1, &lo, &hi);
            for (int b = lo; b < hi; b++)
                sb_normalise_energies(alignments + (size_t)b * astride + (size_t)step * T, T, 0);
            t1_wait(y);
            /* the context over this thread's memory channels, into hc's last E columns */
            sb_share(E, t, nt, 16, &lo, &hi);
            for (int b = 0; b < B; b++) {
                float *ctx = hc + (size_t)b * (A + E) + A;
                const float *al = alignments + (size_t)b * astride + (size_t)step * T;
                const float *vb = m->values + (size_t)b * T * E;
                for (int d = lo; d < hi; d++) ctx[d] = 0.f;
                for (int i = 0; i < T; i++) {
                    const float ai = al[i];
                    const float *vi = vb + (size_t)i * E;
#pragma omp simd
                    for (int d = lo; d < hi; d++) ctx[d] += ai * vi[d];
                }
            }
            t1_wait(y);
            /* cell_0's projection of [h_att, context] into GRU 1's input; GRU 1 (out1 = out0 + h1 to GRU 2's input),
             * GRU 2 (out2 = out1 + h2) */
            sb_share(D, t, nt, 16, &lo, &hi);
            t1_dense(m->cols, m->cell0_w, m->cell0_b, hc, A + E, A + E, D, lo, hi, xh1, 2 * D, B);
            t1_wait(y);
            t1_gru(m, 1, D, D, xh1, xr1, g, cand, xh2, 2 * D, xh1, 2 * D, t, nt, y);
            t1_gru(m, 2, D, D, xh2, xr2, g, cand, out2, D, xh2, 2 * D, t, nt, y);
            /* the frames */
            sb_share(F, t, nt, 16, &lo, &hi);
            t1_dense(m->cols, m->out_w, m->out_b, out2, D, D, F, lo, hi, frames + (size_t)step * F, (int)fstride, B);
            t1_wait(y);
            if (t == 0) {
                /* the stop (a row finished once a step's outputs are all exactly 0.0, and stays finished), the
                 * next input (the step's last frame) and the context the next step's pre-net or GRU reads */
                int all = 1;
                for (int b = 0; b < B; b++) {
                    const float *fb = frames + (size_t)b * fstride + (size_t)step * F;
                    int zero = 1;
                    for (int j = 0; j < F; j++) zero &= fb[j] == 0.f;
                    finished[b] |= zero;
                    all &= finished[b];
                    memcpy(pre_in + (size_t)b * pin, fb + F - M, sizeof(float) * M);
                    const float *ctx = hc + (size_t)b * (A + E) + A;
                    if (m->prenet_outside)
                        memcpy(xh0 + (size_t)b * (n0 + A) + P, ctx, sizeof(float) * E);
                    else
                        memcpy(pre_in + (size_t)b * pin + M, ctx, sizeof(float) * E);
                }
                ran = step + 1;
                done = all;
            }
            t1_wait(y);
            if (done) break;
        }
    }
    for (int i = 0; i < NBUF; i++) free(buf[i]);
    free(finished);
    *steps = ran;
    return 0;
}
