/* Both directions of Tacotron-2's encoder LSTM over time, inference: the recurrence of
 * torch_layers.encoder_rnn.zoneout_lstm_step (and so of TF1's bidirectional_dynamic_rnn over two zoneout LSTM cells)
 * in float32, in one C call for the whole sequence.  The input projections of every step come in precomputed (one
 * large GEMM the framework does well); what is left is, per step and direction, a (batch, u) x (u, 4u) product and
 * the gates' elementwise maths -- ~10 small framework ops a step, 200 steps, which cost more than the products.
 *
 * Every (direction, entry) pair is an independent recurrence: the work is split into (direction, block of entries)
 * tasks, one OpenMP thread each, with no barrier inside the loop.  A step computes only the entries still running
 * (t < length): the others keep their state and output zeros, as the framework's masked step selects.  Inputs and
 * outputs stay in the layer's (batch, time) layout: the backward direction reads and writes each sequence reversed
 * within its length by index, so no reversed copy is made.
 *
 * Built with decoder_step.c into one library by speechblocks/native/__init__.py; tests/test_native_encoder_scan.py
 * holds it to the framework's loop and a float64 twin.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "vector_maths.h"
#include "vector_tiles.h"

/* g_i += h_i . W for the n entries listed: g_i rows of `cols`, h_i rows of n_k; W row-major (n_k, cols) */
static void recurrent_product(const float *W, int cols, int n_k, const float *const *h, float *const *g, int n) {
    const int full = cols / SB_CB * SB_CB;
    for (int j0 = 0; j0 < full; j0 += SB_CB) {
        int i = 0;
        for (; i + 4 <= n; i += 4) sb_tile4(W + j0, (size_t)cols, n_k, h + i, g + i, j0);
        for (; i < n; i++) sb_tile1(W + j0, (size_t)cols, n_k, h[i], g[i], j0);
    }
    for (int i = 0; i < n; i++)
        for (int j = full; j < cols; j++) {
            float acc = g[i][j];
            for (int k = 0; k < n_k; k++) acc += h[i][k] * W[(size_t)k * cols + j];
            g[i][j] = acc;
        }
}

/* One direction's recurrence for entries [b0, b1).
 *   gx:  (batch, time, 2, 4u) input projections, bias included, gate blocks i, f, o, g (this direction's at d)
 *   W:   (u, 4u) recurrent weights of this direction, blocks i, f, o, g
 *   out: (batch, time, 2u); this direction's half of every row of its entries written (zeros past a length)
 * Direction 0 runs positions 0, 1, ..., length - 1; direction 1 runs length - 1, ..., 0 (tf.reverse_sequence) and
 * writes each output at the position it consumed.
 * Returns 0, or -1 when the scratch cannot be allocated. */
static int scan_direction(const float *gx, const float *W, const int *lengths, int n_steps, int u, int d,
                          float keep_new, float keep_old, int zoneout, int b0, int b1, float *out) {
    const int nb = b1 - b0, u4 = 4 * u;
    float *buf = malloc(sizeof(float) * ((size_t)nb * (2 * u + u4) + u));
    const float **hp = malloc(sizeof(float *) * (size_t)nb);
    float **gp = malloc(sizeof(float *) * (size_t)nb);
    int *act = malloc(sizeof(int) * (size_t)nb), *pos = malloc(sizeof(int) * (size_t)nb);
    if (!buf || !hp || !gp || !act || !pos) {
        free(buf), free(hp), free(gp), free(act), free(pos);
        return -1;
    }
    float *h = buf, *c = h + (size_t)nb * u, *g = c + (size_t)nb * u, *tc = g + (size_t)nb * u4;
    memset(h, 0, sizeof(float) * (size_t)nb * 2 * u);
    for (int b = b0; b < b1; b++) {  /* the half-rows past each length: zeros */
        const int len = lengths ? lengths[b] : n_steps;
        for (int p = len; p < n_steps; p++) memset(out + ((size_t)b * n_steps + p) * 2 * u + (size_t)d * u, 0,
                                                   sizeof(float) * (size_t)u);
    }
    for (int t = 0; t < n_steps; t++) {
        int n = 0;
        for (int b = b0; b < b1; b++) {
            const int len = lengths ? lengths[b] : n_steps;
            if (t >= len) continue;
            const int p = d == 0 ? t : len - 1 - t;
            float *gi = g + (size_t)n * u4;
            memcpy(gi, gx + (((size_t)b * n_steps + p) * 2 + d) * u4, sizeof(float) * (size_t)u4);
            hp[n] = h + (size_t)(b - b0) * u;
            gp[n] = gi;
            pos[n] = p;
            act[n++] = b;
        }
        if (n == 0) break;  /* every entry past its length (their rows hold zeros) */
        recurrent_product(W, u4, u, hp, gp, n);
        for (int i = 0; i < n; i++) {
            float *gi = gp[i], *hi = h + (size_t)(act[i] - b0) * u, *ci = c + (size_t)(act[i] - b0) * u;
            float *o = out + ((size_t)act[i] * n_steps + pos[i]) * 2 * u + (size_t)d * u;
            v_sigmoid(gi, 3 * u);
            v_tanh(gi + 3 * u, u);
            const float *ig = gi, *fg = gi + u, *og = gi + 2 * u, *gg = gi + 3 * u;
            for (int j = 0; j < u; j++) tc[j] = fg[j] * ci[j] + ig[j] * gg[j];
            if (zoneout)
                for (int j = 0; j < u; j++) ci[j] = tc[j] * keep_new + ci[j] * keep_old;
            else
                memcpy(ci, tc, sizeof(float) * (size_t)u);
            v_tanh(tc, u);
            for (int j = 0; j < u; j++) o[j] = og[j] * tc[j];
            if (zoneout)
                for (int j = 0; j < u; j++) hi[j] = o[j] * keep_new + hi[j] * keep_old;
            else
                memcpy(hi, o, sizeof(float) * (size_t)u);
        }
    }
    free(buf), free(hp), free(gp), free(act), free(pos);
    return 0;
}

/* Both directions of a bidirectional zoneout LSTM over time (inference zoneout: new * keep_new + prev * keep_old).
 *   gx:      (batch, time, 2, 4u) input projections of both directions at every position, bias and forget bias
 *            included, gate blocks i, f, o, g (one GEMM of the inputs with both directions' input weights)
 *   W:       (2, u, 4u) recurrent weights, blocks i, f, o, g
 *   lengths: (batch,) in [0, time], or NULL (every entry runs every step)
 *   out:     (batch, time, 2u) forward outputs then backward outputs (each at the position it consumed), zeros past
 *            a length: the layer's output
 * Returns 0, or -1 when scratch memory ran out. */
int sb_encoder_scan(const float *gx, const float *W, const int *lengths, int n_steps, int batch, int u,
                    float keep_new, float keep_old, int zoneout, int threads, float *out) {
    const int threads_ = threads < 1 ? 1 : threads;
    int parts = threads_ / 2;
    if (parts < 1) parts = 1;
    if (parts > batch) parts = batch;
    const int tasks = 2 * parts;
    int failed = 0;
#pragma omp parallel for schedule(static) num_threads(threads_ < tasks ? threads_ : tasks) reduction(| : failed)
    for (int task = 0; task < tasks; task++) {
        const int d = task / parts, p = task % parts;
        const int b0 = (int)((long)batch * p / parts), b1 = (int)((long)batch * (p + 1) / parts);
        failed |= scan_direction(gx, W + (size_t)d * u * 4 * u, lengths, n_steps, u, d, keep_new, keep_old, zoneout,
                                 b0, b1, out) != 0;
    }
    return failed ? -1 : 0;
}
