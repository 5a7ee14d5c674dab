/* The Tacotron-2 decoder's stop rule, written once for the C steps (decoder_step.c, decoder_batch.c); the numpy
 * original is speechblocks/stop_rule.py.  Each of a step's r stop probabilities is rounded half to even (tf.round,
 * torch.round, np.rint: exactly 0.5 does not stop; nearbyintf in the default rounding mode); the step fires when
 * every one rounds to 1, or any one with stop_at_any. */
#ifndef SB_STOP_RULE_H
#define SB_STOP_RULE_H

#include <math.h>

/* 1 when the stop rule fires for the r probabilities `stop` (already through the sigmoid), else 0 */
static inline int sb_stop_fired(const float *stop, int r, int stop_at_any) {
    int all = 1, any = 0;
    for (int q = 0; q < r; q++) {
        const int done = nearbyintf(stop[q]) == 1.0f;
        all &= done;
        any |= done;
    }
    return stop_at_any ? any : all;
}

#endif
