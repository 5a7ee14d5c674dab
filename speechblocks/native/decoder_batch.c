/* One Tacotron-2 decoder step for a batch of entries in one call: the batch-1 step of decoder_step.c for the
 * entries still running, its products shared.  The maths of TF1's TacotronDecoderCell (tf_layers'
 * Tacotron2Decoder.step) in float32; only the order of each sum differs from the framework's kernels.
 *
 * Why: from a few entries on, a step's two LSTM products are compute-bound (16 entries: ~0.5 GFLOP a step), and the
 * frameworks' matmul over a kernel that changes layout at every call reaches ~45% of these cores' peak.  Here every
 * product's kernel is packed once per loop into column panels (SB_CB columns, every row: one contiguous stream
 * each, zero columns padding the last), and a panel is multiplied against the entries 4 at a time in registers
 * (vector_tiles.h) in blocks of rows that stay in L1 while every group of 4 entries passes over them.  Threads
 * split the panels of a product, then the units of the LSTM's gate maths, then the entries for the attention.
 *
 * Entries are addressed through `rows`: the caller lists the entries still running and the step computes those
 * only, their state left in place (no gather when an entry stops).  Each entry's attention computes its own
 * positions only: a masked position (score_bias < 0) takes the bias as its energy without computing it.
 *
 * Built with the other sources into one library by speechblocks/native/__init__.py;
 * tests/test_native_decoder_batch.py and tests/test_native_decoder_batch_torch.py hold it to each framework's loop
 * and its float64 run.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <omp.h>

#include "common.h"
#include "stop_rule.h"
#include "vector_maths.h"
#include "vector_tiles.h"

#define SB_ROW_BLOCK 128 /* rows of a panel multiplied against every entry while in L1 (128 x 256 B at AVX-512) */

/* The tile width the packed panels use (the build's SB_CB). */
int sb_tile_columns(void) { return SB_CB; }

/* Packs a row-major (n, cols) kernel (`transposed`: a row-major (cols, n) one, torch's (out, in)) into
 * ceil(cols / SB_CB) panels of (n, SB_CB) floats, zeros past `cols`: out holds panels * n * SB_CB floats. */
void sb_pack_panels(const float *W, int n, int cols, int transposed, float *out) {
    const int panels = (cols + SB_CB - 1) / SB_CB;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        float *o = out + (size_t)p * n * SB_CB;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < SB_CB; j++) {
                const int c = p * SB_CB + j;
                o[(size_t)k * SB_CB + j] = c >= cols ? 0.f : transposed ? W[(size_t)c * n + k] : W[(size_t)k * cols + c];
            }
    }
}

/* The weights of a decoder, every product's kernel packed (sb_pack_panels), and the attention memory of the batch. */
typedef struct {
    int layers, units, input0;       /* LSTM stack; layer 1's input is [pre-net output, context] (input0 wide) */
    const float *lstm_w[SB_MAX_LAYERS], *lstm_b[SB_MAX_LAYERS];  /* packed (in_k + u -> 4u); (4u,) */
    int gate_i, gate_f, gate_g, gate_o;  /* each gate's block of u (torch 0,1,2,3; TF1 i,j,f,o: 0,2,1,3) */
    float keep_new, keep_old;        /* inference zoneout: new * keep_new + prev * keep_old */
    int zoneout;
    int prenet_layers, num_mels;
    int prenet_sizes[SB_MAX_LAYERS];
    const float *prenet_w[SB_MAX_LAYERS], *prenet_b[SB_MAX_LAYERS];  /* packed (in -> size); (size,) */
    float drop_rate, drop_scale;     /* keep where u >= rate; kept = x * scale */
    int att_units, max_time, memory_size, kernel, pad_before, smoothing, cumulate;
    const float *query_w;            /* packed (units -> att_units) */
    const float *location_wt;        /* (kernel, att_units): the fused location kernel, transposed */
    const float *v_a;                /* (att_units,) */
    const float *keys_t;             /* (batch, max_time, att_units): keys with every constant bias */
    const float *values;             /* (batch, max_time, memory_size) */
    const float *score_bias;         /* (batch, max_time) 0 / -inf, or NULL */
    int proj_rows, frame_size, r, stop_at_any;
    const float *proj_w, *proj_b;    /* packed (units + memory_size -> frame_size + r); (frame_size + r,) */
    int threads;
} sb_batch_decoder;

/* The recurrent state of every entry and the scratch of a step (float32 buffers the caller allocates). Widths:
 * W(x) = x rounded up to SB_CB. */
typedef struct {
    float *cells, *hiddens;          /* (batch, layers, units) */
    float *context;                  /* (batch, memory_size) */
    float *attention;                /* (batch, max_time) cumulative alignments */
    float *frame;                    /* (batch, num_mels) the previous frame */
    float *xin;                      /* (batch, layers, nmax): each layer's [input, h] */
    int nmax;
    float *gates;                    /* (batch, gmax): gmax >= W(4u), W(prenet sizes), W(att_units), W(proj_rows) */
    int gmax;
    float *prenet;                   /* (batch, gmax): a pre-net layer's output */
    float *query;                    /* (batch, W(att_units)) */
    float *energy;                   /* (threads, max_time * att_units) tanh arguments */
    float *out;                      /* (batch, units + memory_size): [LSTM output, context] */
} sb_batch_state;

/* The layouts of sb_batch_decoder and sb_batch_state, for the loader's check of its ctypes mirrors. */
const sb_layout_entry *sb_batch_decoder_layout(void) {
    static const sb_layout_entry table[] = {SB_DECODER_FIELDS(sb_batch_decoder), SB_END(sb_batch_decoder)};
    return table;
}

const sb_layout_entry *sb_batch_state_layout(void) {
    static const sb_layout_entry table[] = {
        SB_FIELD(sb_batch_state, cells), SB_FIELD(sb_batch_state, hiddens), SB_FIELD(sb_batch_state, context),
        SB_FIELD(sb_batch_state, attention), SB_FIELD(sb_batch_state, frame), SB_FIELD(sb_batch_state, xin),
        SB_FIELD(sb_batch_state, nmax), SB_FIELD(sb_batch_state, gates), SB_FIELD(sb_batch_state, gmax),
        SB_FIELD(sb_batch_state, prenet), SB_FIELD(sb_batch_state, query), SB_FIELD(sb_batch_state, energy),
        SB_FIELD(sb_batch_state, out), SB_END(sb_batch_state)};
    return table;
}

/* g[e][: W(cols)] = h[e][: n_k] . K + bias (zeros past cols) for the n entries, K packed (n_k -> cols), bias NULL
 * for none; thread t of nt computes its share of the panels. */
static void product(const float *K, const float *bias, int n_k, int cols, const float *const *h, float *const *g,
                    int n, int t, int nt) {
    const int panels = (cols + SB_CB - 1) / SB_CB;
    int p0, p1;
    sb_share(panels, t, nt, 1, &p0, &p1);
    for (int p = p0; p < p1; p++) {
        const int off = p * SB_CB;
        for (int e = 0; e < n; e++)
            for (int j = 0; j < SB_CB; j++) g[e][off + j] = (bias && off + j < cols) ? bias[off + j] : 0.f;
        const float *panel = K + (size_t)p * n_k * SB_CB;
        for (int k0 = 0; k0 < n_k; k0 += SB_ROW_BLOCK) {
            const int kb = n_k - k0 < SB_ROW_BLOCK ? n_k - k0 : SB_ROW_BLOCK;
            const float *block = panel + (size_t)k0 * SB_CB;
            int e = 0;
            for (; e + 4 <= n; e += 4) {
                const float *hp[4] = {h[e] + k0, h[e + 1] + k0, h[e + 2] + k0, h[e + 3] + k0};
                sb_tile4(block, SB_CB, kb, hp, g + e, off);
            }
            for (; e < n; e++) sb_tile1(block, SB_CB, kb, h[e] + k0, g[e], off);
        }
    }
}

/* e[c] = (keys_i[c] + q[c]) + sum over the taps kk of W[kk, c] * att[i + kk - pb] (in order of kk; taps outside
 * [0, T) skipped): position i's tanh argument, the location convolution of the previous alignments in registers,
 * SB_CB units at a time. */
static void location_energy(const float *W, const float *att, const float *keys_i, const float *q, int i, int T,
                            int K, int pb, int U, float *e) {
    int c0 = 0;
    for (; c0 + SB_CB <= U; c0 += SB_CB) {
        sb_vf acc[SB_NV];
        for (int v = 0; v < SB_NV; v++) acc[v] = (sb_vf){0};
        for (int kk = 0; kk < K; kk++) {
            const int src = i + kk - pb;
            if (src < 0 || src >= T) continue;
            const float sv = att[src];
            const float *w = W + (size_t)kk * U + c0;
            for (int v = 0; v < SB_NV; v++) acc[v] += vload(w + v * SB_VL) * sv;
        }
        for (int v = 0; v < SB_NV; v++)
            vstore(e + c0 + v * SB_VL, (vload(keys_i + c0 + v * SB_VL) + vload(q + c0 + v * SB_VL)) + acc[v]);
    }
    for (int c = c0; c < U; c++) {
        float acc = 0.f;
        for (int kk = 0; kk < K; kk++) {
            const int src = i + kk - pb;
            if (src >= 0 && src < T) acc += W[(size_t)kk * U + c] * att[src];
        }
        e[c] = (keys_i[c] + q[c]) + acc;
    }
}

/* ctx[d] = sum over i of a[i] * values[i, d] (in order of i), SB_CB channels at a time in registers */
static void weighted_sum(const float *a, const float *values, int T, int D, float *ctx) {
    int d0 = 0;
    for (; d0 + SB_CB <= D; d0 += SB_CB) {
        sb_vf acc[SB_NV];
        for (int v = 0; v < SB_NV; v++) acc[v] = (sb_vf){0};
        for (int i = 0; i < T; i++) {
            const float ai = a[i];
            const float *vi = values + (size_t)i * D + d0;
            for (int v = 0; v < SB_NV; v++) acc[v] += ai * vload(vi + v * SB_VL);
        }
        for (int v = 0; v < SB_NV; v++) vstore(ctx + d0 + v * SB_VL, acc[v]);
    }
    for (int d = d0; d < D; d++) {
        float acc = 0.f;
        for (int i = 0; i < T; i++) acc += a[i] * values[(size_t)i * D + d];
        ctx[d] = acc;
    }
}

/* One step of the n entries listed in rows (indices into the batch, each once).
 *   uniform:     (n, sum of pre-net sizes) the pre-net's uniform draws (keep where >= drop_rate), or keep-masks
 *                (keep where != 0) when keep_given
 *   projected:   (n, proj_rows) written: frames then stop probabilities
 *   alignments:  (n, max_time) written (zeros at masked positions)
 *   fired:       (n,) written: 1 where the entry's stop rule fired (every one of its r stop probabilities rounds to
 *                1, or any with stop_at_any)
 * Returns 0, or -1 for a batch beyond SB_MAX_BATCH. */
int sb_decoder_step_batch(const sb_batch_decoder *m, sb_batch_state *s, int n, const int *rows, const float *uniform,
                          int keep_given, float *projected, float *alignments, int *fired) {
    if (n < 1 || n > SB_MAX_BATCH) return -1;
    const int u = m->units, T = m->max_time, D = m->memory_size, U = m->att_units, L = m->layers;
    const int n_pre = m->prenet_layers, p_last = m->prenet_sizes[n_pre - 1];
    int total_pre = 0;
    for (int k = 0; k < n_pre; k++) total_pre += m->prenet_sizes[k];
    const float *h_in[SB_MAX_BATCH];
    float *g_out[SB_MAX_BATCH];
#pragma omp parallel num_threads(m->threads)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int lo, hi;
        /* pre-net: dense -> relu -> dropout (a dropped entry is 0), layer by layer, over this thread's panels */
        int pin = m->num_mels, off = 0;
        for (int k = 0; k < n_pre; k++) {
            const int size = m->prenet_sizes[k];
            /* layer k writes the gates buffer when k is even, the pre-net buffer when odd; it reads the other */
            float *in_buf = k % 2 == 0 ? s->prenet : s->gates, *out_buf = k % 2 == 0 ? s->gates : s->prenet;
            const float *hx[SB_MAX_BATCH];
            float *gy[SB_MAX_BATCH];
            for (int e = 0; e < n; e++) {
                hx[e] = k == 0 ? s->frame + (size_t)rows[e] * m->num_mels : in_buf + (size_t)rows[e] * s->gmax;
                gy[e] = out_buf + (size_t)rows[e] * s->gmax;
            }
            product(m->prenet_w[k], m->prenet_b[k], pin, size, hx, gy, n, t, nt);
            int p0, p1;
            sb_share((size + SB_CB - 1) / SB_CB, t, nt, 1, &p0, &p1);
            const int c0 = p0 * SB_CB, c1 = p1 * SB_CB < size ? p1 * SB_CB : size;
            for (int e = 0; e < n; e++) {
                float *y = gy[e];
                const float *dr = uniform + (size_t)e * total_pre + off;
                for (int j = c0; j < c1; j++)
                    y[j] = sb_prenet_unit(y[j], dr[j], keep_given, m->drop_rate, m->drop_scale);
            }
            off += size;
            pin = size;
#pragma omp barrier
        }
        /* layer 1's input: [pre-net output, context, h_1]; the upper layers' [h_below (written below), h_k] */
        for (int e = t; e < n; e += nt) {
            const int b = rows[e];
            float *x0 = s->xin + (size_t)b * L * s->nmax;
            const float *py = ((n_pre - 1) % 2 == 0 ? s->gates : s->prenet) + (size_t)b * s->gmax;
            memcpy(x0, py, sizeof(float) * p_last);
            memcpy(x0 + p_last, s->context + (size_t)b * D, sizeof(float) * D);
            memcpy(x0 + m->input0, s->hiddens + (size_t)b * L * u, sizeof(float) * u);
            for (int k = 1; k < L; k++)
                memcpy(x0 + (size_t)k * s->nmax + u, s->hiddens + ((size_t)b * L + k) * u, sizeof(float) * u);
        }
        if (t == 0)
            for (int e = 0; e < n; e++) g_out[e] = s->gates + (size_t)rows[e] * s->gmax;
#pragma omp barrier
        for (int k = 0; k < L; k++) {
            const int n_k = (k == 0 ? m->input0 : u) + u;
            if (t == 0)
                for (int e = 0; e < n; e++) h_in[e] = s->xin + ((size_t)rows[e] * L + k) * s->nmax;
#pragma omp barrier
            product(m->lstm_w[k], m->lstm_b[k], n_k, 4 * u, h_in, g_out, n, t, nt);
#pragma omp barrier
            sb_share(u, t, nt, 4, &lo, &hi);
            const int w = hi - lo;
            for (int e = 0; e < n && w > 0; e++) {
                const int b = rows[e];
                float *g = g_out[e];
                float *xn = k + 1 < L ? s->xin + ((size_t)b * L + k + 1) * s->nmax : s->out + (size_t)b * (u + D);
                sb_lstm_units(g + m->gate_i * u, g + m->gate_f * u, g + m->gate_g * u, g + m->gate_o * u,
                              s->cells + ((size_t)b * L + k) * u, s->hiddens + ((size_t)b * L + k) * u, lo, hi,
                              m->keep_new, m->keep_old, m->zoneout, xn);
            }
#pragma omp barrier
        }
        /* attention: the processed queries of every entry (one product), then each entry's own positions */
        if (t == 0)
            for (int e = 0; e < n; e++) {
                h_in[e] = s->out + (size_t)rows[e] * (u + D);
                g_out[e] = s->query + (size_t)rows[e] * ((U + SB_CB - 1) / SB_CB * SB_CB);
            }
#pragma omp barrier
        product(m->query_w, NULL, u, U, h_in, g_out, n, t, nt);
#pragma omp barrier
        for (int e = t; e < n; e += nt) {
            const int b = rows[e], K = m->kernel, pb = m->pad_before;
            const float *q = s->query + (size_t)b * ((U + SB_CB - 1) / SB_CB * SB_CB), *keys = m->keys_t + (size_t)b * T * U, *vals = m->values + (size_t)b * T * D;
            const float *sb = m->score_bias ? m->score_bias + (size_t)b * T : NULL;
            float *att = s->attention + (size_t)b * T, *a = alignments + (size_t)e * T;
            float *en = s->energy + (size_t)t * T * U;
            int n_e = 0; /* the unmasked positions, their tanh arguments packed in order */
            for (int i = 0; i < T; i++) {
                if (sb && sb[i] < 0.f) continue;
                location_energy(m->location_wt, att, keys + (size_t)i * U, q, i, T, K, pb, U, en + (size_t)n_e++ * U);
            }
            v_tanh(en, n_e * U);
            n_e = 0;
            for (int i = 0; i < T; i++) {
                if (sb && sb[i] < 0.f) {
                    a[i] = sb[i];
                    continue;
                }
                const float *ei = en + (size_t)n_e++ * U;
                float acc = 0.f;
#pragma omp simd reduction(+ : acc)
                for (int c = 0; c < U; c++) acc += m->v_a[c] * ei[c];
                a[i] = acc;
            }
            sb_normalise_energies(a, T, m->smoothing);
            weighted_sum(a, vals, T, D, s->out + (size_t)b * (u + D) + u);
            for (int i = 0; i < T; i++) att[i] = m->cumulate ? a[i] + att[i] : a[i];
        }
        /* frame and stop projections over [output, context] */
        if (t == 0)
            for (int e = 0; e < n; e++) g_out[e] = s->gates + (size_t)rows[e] * s->gmax;
#pragma omp barrier
        product(m->proj_w, m->proj_b, u + D, m->proj_rows, h_in, g_out, n, t, nt);
#pragma omp barrier
        for (int e = t; e < n; e += nt) {
            const int b = rows[e];
            float *pr = projected + (size_t)e * m->proj_rows;
            memcpy(pr, g_out[e], sizeof(float) * m->proj_rows);
            memcpy(s->context + (size_t)b * D, s->out + (size_t)b * (u + D) + u, sizeof(float) * D);
            v_sigmoid(pr + m->frame_size, m->r);
            fired[e] = sb_stop_fired(pr + m->frame_size, m->r, m->stop_at_any);
            memcpy(s->frame + (size_t)b * m->num_mels, pr + m->frame_size - m->num_mels, sizeof(float) * m->num_mels);
        }
    }
    return 0;
}
