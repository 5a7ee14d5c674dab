/* One Tacotron-2 decoder step at batch 1 in one call: pre-net, zoneout LSTM stack, location-sensitive attention,
 * frame and stop projections, the stop rule.  The maths of torch_layers.tacotron2_decoder.decoder_step (and so of
 * TF1's TacotronDecoderCell), in float32; only the order of each sum differs from the library kernels.
 *
 * Why: at batch 1 a step streams ~60 MiB of LSTM weights, and the ~100 small ops around those two products cost
 * more than the products' distance from the memory bandwidth.  Here the whole step runs in one OpenMP parallel
 * region (the process's OpenMP runtime: torch's, loaded first), each thread streaming its own rows.
 *
 * Both frameworks' weight layouts are read in place: torch's (out, in) rows with gates i, f, g, o, Keras/TF1's
 * (in, out) columns with gates i, j, f, o.  Built on first use by speechblocks/native/__init__.py (cc -O3
 * -march=native -fopenmp); tests/test_native_decoder_step*.py hold it to each framework's own loop.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <omp.h>

#include "common.h"
#include "stop_rule.h"
#include "vector_maths.h"

/* y[r] = W[r, :] . x + b[r] for rows [r0, r1) of a row-major (rows, n) W; b may be NULL.  One row at a time: a
 * single stream per thread reads faster here than 4 or 8 rows at once (72 vs 51-59 GB/s in a probe). */
static void gemv_rows(const float *W, const float *b, const float *x, int n, int r0, int r1, float *y) {
    for (int r = r0; r < r1; r++) {
        const float *w = W + (size_t)r * n;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int i = 0; i < n; i++) acc += w[i] * x[i];
        y[r] = b ? acc + b[r] : acc;
    }
}

/* y[c] = x . W[:, c] + b[c] for columns [c0, c1) of a row-major (n, cols) W (the Keras layout of a dense kernel);
 * b may be NULL */
static void gemv_cols(const float *W, const float *b, const float *x, int n, int cols, int c0, int c1, float *y) {
    for (int c = c0; c < c1; c++) y[c] = 0.f;
    for (int i = 0; i < n; i++) {
        const float xi = x[i], *w = W + (size_t)i * cols;
#pragma omp simd
        for (int c = c0; c < c1; c++) y[c] += xi * w[c];
    }
    if (b)
        for (int c = c0; c < c1; c++) y[c] += b[c];
}

/* p[c] = sum over rows [i0, i1) of x[i] W[i, c], every column of a row-major (n, cols) W: one thread's partial
 * product over its own block of rows (a contiguous stream), four rows at a time */
static void gemv_cols_partial(const float *W, const float *x, int cols, int i0, int i1, float *p) {
    for (int c = 0; c < cols; c++) p[c] = 0.f;
    int i = i0;
    for (; i + 4 <= i1; i += 4) {
        const float *w0 = W + (size_t)i * cols, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
        const float x0 = x[i], x1 = x[i + 1], x2 = x[i + 2], x3 = x[i + 3];
#pragma omp simd
        for (int c = 0; c < cols; c++) p[c] += x0 * w0[c] + x1 * w1[c] + x2 * w2[c] + x3 * w3[c];
    }
    for (; i < i1; i++) {
        const float x0 = x[i], *w0 = W + (size_t)i * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++) p[c] += x0 * w0[c];
    }
}

/* a dense layer's outputs [lo, hi) in either layout */
static void dense(int cols, const float *W, const float *b, const float *x, int n_in, int n_out, int lo, int hi,
                  float *y) {
    if (cols)
        gemv_cols(W, b, x, n_in, n_out, lo, hi, y);
    else
        gemv_rows(W, b, x, n_in, lo, hi, y);
}

/* The weights and constants of a decoder (pointers into torch tensors, float32, contiguous). */
typedef struct {
    int layers, units, input0;       /* LSTM stack; layer 1's input is [pre-net output, context] (input0 wide) */
    const float *lstm_w[SB_MAX_LAYERS], *lstm_b[SB_MAX_LAYERS];  /* (4u, in_k + u) or (in_k + u, 4u); (4u,) */
    int lstm_cols;                   /* 0: torch's (4u, in) rows; 1: TF1's (in, 4u) columns */
    int gate_i, gate_f, gate_g, gate_o;  /* each gate's block of u (torch 0,1,2,3; TF1 i,j,f,o: 0,2,1,3) */
    int dense_cols;                  /* the pre-net, query and projection kernels: 0 (out, in), 1 (in, out) */
    float keep_new, keep_old;        /* inference zoneout: new * keep_new + prev * keep_old */
    int zoneout;
    int prenet_layers, num_mels;
    int prenet_sizes[SB_MAX_LAYERS];
    const float *prenet_w[SB_MAX_LAYERS], *prenet_b[SB_MAX_LAYERS];
    float drop_rate, drop_scale;     /* keep where u >= rate; kept = x * scale */
    int att_units, max_time, memory_size, kernel, pad_before, smoothing, cumulate;
    const float *query_w;            /* (att_units, units) or (units, att_units) */
    const float *location_wt;        /* (kernel, att_units): the fused location kernel, transposed */
    const float *v_a;                /* (att_units,) */
    const float *keys_t;             /* (max_time, att_units): keys with every constant bias */
    const float *values;             /* (max_time, memory_size) */
    const float *score_bias;         /* (max_time,) 0 / -inf, or NULL */
    int proj_rows, frame_size, r, stop_at_any;
    const float *proj_w, *proj_b;    /* (frame_size + r, units + memory_size) or transposed, (frame_size + r,) */
    int threads;
} sb_decoder;

/* The recurrent state and the scratch of a step (float32 buffers the caller allocates, sizes in comments). */
typedef struct {
    float *cells, *hiddens;          /* (layers, units) */
    float *context;                  /* (memory_size) */
    float *attention;                /* (max_time) cumulative alignments */
    float *frame;                    /* (num_mels) the previous frame */
    float *xin;                      /* (layers + 1, nmax): each layer's [input, h] */
    int nmax;
    float *gates;                    /* (4u) */
    float *partial;                  /* (threads, 4u): column layout, each thread's partial gates */
    float *prenet_buf;               /* (2, prenet_max) */
    int prenet_max;
    float *query;                    /* (att_units) */
    float *energy;                   /* (att_units * max_time) tanh arguments, then (max_time) energies */
    float *out;                      /* (units + memory_size): [LSTM output, context] */
    double *timings;                 /* NULL, or (SB_PHASES) seconds added per phase (thread 0's clock) */
} sb_state;

/* The layouts of sb_decoder and sb_state and the limits, for the loader's check of its ctypes mirrors. */
const sb_layout_entry *sb_decoder_layout(void) {
    static const sb_layout_entry table[] = {SB_DECODER_FIELDS(sb_decoder), SB_FIELD(sb_decoder, lstm_cols),
                                            SB_FIELD(sb_decoder, dense_cols), SB_END(sb_decoder)};
    return table;
}

const sb_layout_entry *sb_state_layout(void) {
    static const sb_layout_entry table[] = {
        SB_FIELD(sb_state, cells), SB_FIELD(sb_state, hiddens), SB_FIELD(sb_state, context),
        SB_FIELD(sb_state, attention), SB_FIELD(sb_state, frame), SB_FIELD(sb_state, xin), SB_FIELD(sb_state, nmax),
        SB_FIELD(sb_state, gates), SB_FIELD(sb_state, partial), SB_FIELD(sb_state, prenet_buf),
        SB_FIELD(sb_state, prenet_max), SB_FIELD(sb_state, query), SB_FIELD(sb_state, energy),
        SB_FIELD(sb_state, out), SB_FIELD(sb_state, timings), SB_END(sb_state)};
    return table;
}

const sb_layout_entry *sb_limits(void) {
    static const sb_layout_entry table[] = {{"MAX_LAYERS", SB_MAX_LAYERS}, {"MAX_ATTENTION_UNITS", SB_MAX_UNITS},
                                            {"MAX_BATCH", SB_MAX_BATCH}, {NULL, 0}};
    return table;
}

/* the phases of a step, in sb_state.timings: pre-net, LSTM stack, attention query, energies (location convolution,
 * tanh, v_a), their normalisation, context and attention state, projections and the stop rule */
#define SB_PHASES 7
#define SB_MARK(phase)                                          \
    do {                                                        \
        if (s->timings && t == 0) {                             \
            double now_ = omp_get_wtime();                      \
            s->timings[phase] += now_ - mark_;                  \
            mark_ = now_;                                       \
        }                                                       \
    } while (0)

/* One step.  uniform: the pre-net's uniform draws (sum of prenet sizes), or keep-masks when keep_given;
 * writes projected (proj_rows: frames then stop probabilities) and alignments (max_time); returns 1 when the stop
 * rule fired (every one of the r stop probabilities rounds to 1, or any of them with stop_at_any). */
int sb_decoder_step(const sb_decoder *m, sb_state *s, const float *uniform, int keep_given, float *projected,
                    float *alignments) {
    const int u = m->units, T = m->max_time, D = m->memory_size, U = m->att_units;
    int fired = 0;
#pragma omp parallel num_threads(m->threads)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int lo, hi;
        double mark_ = s->timings && t == 0 ? omp_get_wtime() : 0.0;
        /* pre-net: dense -> relu -> dropout (selected: a dropped entry is 0), layer by layer */
        const float *px = s->frame;
        int pin = m->num_mels, off = 0;
        for (int k = 0; k < m->prenet_layers; k++) {
            int n_out = m->prenet_sizes[k];
            float *py = s->prenet_buf + (size_t)(k % 2) * s->prenet_max;
            if (k == m->prenet_layers - 1) py = s->xin;  /* the last layer writes layer 1's input directly */
            sb_share(n_out, t, nt, 4, &lo, &hi);
            dense(m->dense_cols, m->prenet_w[k], m->prenet_b[k], px, pin, n_out, lo, hi, py);
            for (int j = lo; j < hi; j++)
                py[j] = sb_prenet_unit(py[j], uniform[off + j], keep_given, m->drop_rate, m->drop_scale);
            off += n_out;
            px = py;
            pin = n_out;
#pragma omp barrier
        }
        SB_MARK(0);
        /* LSTM stack: thread t owns units [lo, hi) and so all four gate rows of each */
        sb_share(u, t, nt, 4, &lo, &hi);
        if (t == 0) {
            memcpy(s->xin + m->prenet_sizes[m->prenet_layers - 1], s->context, sizeof(float) * D);
        }
        for (int j = lo; j < hi; j++) s->xin[m->input0 + j] = s->hiddens[j];
#pragma omp barrier
        for (int k = 0; k < m->layers; k++) {
            const int n = (k == 0 ? m->input0 : u) + u;
            const float *xk = s->xin + (size_t)k * s->nmax;
            float *xn = s->xin + (size_t)(k + 1) * s->nmax;
            float *g = s->gates;
            if (m->lstm_cols) {  /* each thread a block of rows, then each its units' sums of the partials */
                int i0, i1;
                sb_share(n, t, nt, 4, &i0, &i1);
                gemv_cols_partial(m->lstm_w[k], xk, 4 * u, i0, i1, s->partial + (size_t)t * 4 * u);
#pragma omp barrier
                for (int q = 0; q < 4; q++)
                    for (int j = q * u + lo; j < q * u + hi; j++) {
                        float acc = 0.f;
                        for (int p = 0; p < nt; p++) acc += s->partial[(size_t)p * 4 * u + j];
                        g[j] = acc + m->lstm_b[k][j];
                    }
            } else {
                for (int q = 0; q < 4; q++) gemv_rows(m->lstm_w[k], m->lstm_b[k], xk, n, q * u + lo, q * u + hi, g);
            }
            if (k + 1 < m->layers)
                for (int j = lo; j < hi; j++) xn[u + j] = s->hiddens[(size_t)(k + 1) * u + j];
            sb_lstm_units(g + m->gate_i * u, g + m->gate_f * u, g + m->gate_g * u, g + m->gate_o * u,
                          s->cells + (size_t)k * u, s->hiddens + (size_t)k * u, lo, hi, m->keep_new, m->keep_old,
                          m->zoneout, k + 1 < m->layers ? xn : s->out);
#pragma omp barrier
        }
        SB_MARK(1);
        /* attention: the processed query, then energies over this thread's share of the memory steps */
        sb_share(U, t, nt, 4, &lo, &hi);
        dense(m->dense_cols, m->query_w, NULL, s->out, u, U, lo, hi, s->query);
#pragma omp barrier
        SB_MARK(2);
        sb_share(T, t, nt, 4, &lo, &hi);
        if (hi > lo) {
            const int K = m->kernel, pb = m->pad_before;
            float *e = s->energy + (size_t)lo * U;  /* (hi - lo, U): the tanh arguments of these steps */
            for (int i = lo; i < hi; i++) {
                float *ei = e + (size_t)(i - lo) * U;
                float loc[SB_MAX_UNITS];
                for (int a = 0; a < U; a++) loc[a] = 0.f;
                for (int kk = 0; kk < K; kk++) {  /* 'same' convolution of the previous (cumulative) alignments */
                    const int src = i + kk - pb;
                    if (src < 0 || src >= T) continue;
                    const float sv = s->attention[src];
                    const float *lw = m->location_wt + (size_t)kk * U;
#pragma omp simd
                    for (int a = 0; a < U; a++) loc[a] += lw[a] * sv;
                }
                const float *ki = m->keys_t + (size_t)i * U;
#pragma omp simd
                for (int a = 0; a < U; a++) ei[a] = (ki[a] + s->query[a]) + loc[a];
            }
            v_tanh(e, (hi - lo) * U);
            for (int i = lo; i < hi; i++) {
                const float *ei = e + (size_t)(i - lo) * U;
                float acc = 0.f;
#pragma omp simd reduction(+ : acc)
                for (int a = 0; a < U; a++) acc += m->v_a[a] * ei[a];
                if (m->score_bias && m->score_bias[i] < 0.f) acc = m->score_bias[i];
                alignments[i] = acc;  /* the energies, normalised below */
            }
        }
#pragma omp barrier
        SB_MARK(3);
        if (t == 0) {
            sb_normalise_energies(alignments, T, m->smoothing);
        }
#pragma omp barrier
        SB_MARK(4);
        /* context over this thread's memory channels; the new attention state over its steps */
        sb_share(D, t, nt, 16, &lo, &hi);
        for (int d = lo; d < hi; d++) s->out[u + d] = 0.f;
        for (int i = 0; i < T; i++) {
            const float ai = alignments[i];
            const float *vi = m->values + (size_t)i * D;
#pragma omp simd
            for (int d = lo; d < hi; d++) s->out[u + d] += ai * vi[d];
        }
        sb_share(T, t, nt, 16, &lo, &hi);
        for (int i = lo; i < hi; i++) s->attention[i] = m->cumulate ? alignments[i] + s->attention[i] : alignments[i];
#pragma omp barrier
        SB_MARK(5);
        /* frame and stop projections over [output, context] */
        sb_share(m->proj_rows, t, nt, 4, &lo, &hi);
        dense(m->dense_cols, m->proj_w, m->proj_b, s->out, u + D, m->proj_rows, lo, hi, projected);
#pragma omp barrier
        if (t == 0) {
            memcpy(s->context, s->out + u, sizeof(float) * D);
            v_sigmoid(projected + m->frame_size, m->r);
            fired = sb_stop_fired(projected + m->frame_size, m->r, m->stop_at_any);
            memcpy(s->frame, projected + m->frame_size - m->num_mels, sizeof(float) * m->num_mels);
        }
        SB_MARK(6);
    }
    return fired;
}
