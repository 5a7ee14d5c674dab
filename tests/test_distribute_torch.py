"""Data-parallel training of the torch blocks: a ``DistributedDataParallel`` step equals the single-process step.

What this module proves (``torch.distributed`` with the gloo backend, 2 processes on 127.0.0.1 started by one
``torch.multiprocessing.spawn`` for every distributed check; a 60 s collective timeout and a deadline on the
whole spawn make a hang fail the test). The global batch of 4 is split 2 + 2 (the GE2E speakers 3 + 1); each
check runs one SGD step (lr 0.1) under DDP and compares every parameter and batch-norm moving statistic after
the step, and the loss, with one process running the same step on the global batch (max |diff| <= 1e-5):

1. **Global loss reduction + synchronised batch statistics** (``reduction="global"``, ``sync_batch_norm=True``):
   - a small model of ``EncoderConvolutions`` (dropout 0.5, keep-masks injected), ``Conv1DBlock`` (even kernel,
     batch norm after the activation), ``Postnet`` and ``CBHG`` trained with ``masked_mse`` +
     ``masked_sigmoid_cross_entropy`` + ``masked_linear_loss``; target lengths 12, 9 | 5, 3 (r = 2): the ranks hold
     different numbers of valid frames, and rank 1's longest target (5 -> 6 frames) is shorter than the padded
     time axis (12);
   - ``Tacotron2`` RTVC (small hparams, ``mask_decoder`` off: plain means over every frame) and Rayhane
     (``predict_linear`` with the post-CBHG, ``mask_decoder`` on, r = 2) with ``tacotron2_loss``, dropout and
     zoneout on with every keep-mask injected (the rank gets its rows of the global masks).
   Every rank reports the loss of the global batch.
2. ``sync_batch_norm=True`` without a process group is plain batch norm and the two reductions are the
   single-process loss, bit for bit (``test_without_process_group_everything_is_single_process``).
3. **The original's multi-tower training** (``sync_batch_norm=False`` + ``reduction="per_replica"``) equals its own
   simulation in one process: each half batch through its own copy of the model (its own batch statistics and
   moving-statistic update), the two half losses' gradients averaged; and it differs from the global step (by
   more than 1e-4), so the checks above can tell the two apart.
4. **The torch-native modules**: ``SpeakerEncoder`` with the GE2E loss over embeddings gathered from both ranks
   (``gather_embeddings``; 3 speakers on one rank, 1 on the other), the similarity matrix (hence the EER) of the
   global batch on every rank, ``do_gradient_ops`` on DDP's averaged gradients; ``TAC`` (mean loss),
   ``GaussianEmbedding`` (``masked_mse`` over each row's frames, the ranks' frame axes of different lengths) and
   ``ContrastiveLoss`` (same-utterance negatives injected) in one DDP model whose ``forward`` returns the loss.

Measured (2 cores): max |diff| after the step 3e-8 .. 2e-7 (the largest a conv bias right before batch norm, whose
exact gradient is 0), the multi-tower step equal to its simulation bit for bit, and 3.5e-2 away from the global
step; the spawn with its checks took 29-41 s on a shared 2-core machine under load (load average 7-9): importing
torch and, for DDP, ``torch._dynamo`` in each worker is most of it; the single-process references run meanwhile.
5. The helpers: ``world_size``, ``is_distributed``, ``gather_embeddings`` (unequal sizes, ``dim=1``, gradients),
   ``global_sum``; a time axis that is not a multiple of r is still refused on a rank (with the data-parallel
   message).
"""
from __future__ import annotations

import copy
import datetime
import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from tests.helpers.tacotron2_checkpoint import SMALL_RAYHANE, SMALL_RTVC
from torch_layers import (
    CBHG,
    TAC,
    ContrastiveLoss,
    Conv1DBlock,
    EncoderConvolutions,
    GaussianEmbedding,
    Postnet,
    SpeakerEncoder,
    Tacotron2,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
    tacotron2_loss,
)
from torch_layers import distributed as tl_dist

WORLD = 2
LR = 0.1
TOL = 1e-5
COLLECTIVE_TIMEOUT_S = 60  # a collective waiting longer raises in the worker (gloo timeout)
SPAWN_DEADLINE_S = 240  # the whole spawn; past it the workers are killed and the test fails
N_SYM = 66


# -- models and data (built identically in the test process and in the workers) ---------------------------------

class BlocksNet(nn.Module):
    """Encoder convolutions -> conv block -> postnet -> mel / stop projections; CBHG -> linear projection."""

    def __init__(self, sync: bool):
        super().__init__()
        self.enc = EncoderConvolutions(6, kernel_size=3, channels=8, num_layers=2, drop_rate=0.5, sync_batch_norm=sync)
        self.conv = Conv1DBlock(8, 4, 8, "relu", 0.0, "after", sync_batch_norm=sync)
        self.post = Postnet(8, kernel_size=3, channels=8, num_layers=2, drop_rate=0.0, sync_batch_norm=sync)
        self.mel = nn.Linear(8, 5)
        self.stop = nn.Linear(8, 1)
        self.cbhg = CBHG(5, 3, 4, 2, [8, 5], 3, 1, 8, 4, sync_batch_norm=sync)
        self.linear = nn.Linear(8, 12)

    def forward(self, x, lengths, enc_masks):
        h = self.post(self.conv(self.enc(x, enc_masks)))
        mel = self.mel(h)
        return {"mel": mel, "stop": self.stop(h)[..., 0], "linear": self.linear(self.cbhg(mel, lengths))}


def _blocks_loss(out, batch, reduction):
    lengths = batch["lengths"]
    return (masked_mse(batch["mel"], out["mel"], lengths, outputs_per_step=2, reduction=reduction)
            + masked_sigmoid_cross_entropy(batch["stop"], out["stop"], lengths, outputs_per_step=2, pos_weight=3.0,
                                           reduction=reduction)
            + masked_linear_loss(batch["linear"], out["linear"], lengths, outputs_per_step=2, sample_rate=8000,
                                 num_freq=12, reduction=reduction))


def _blocks_batch(g):
    b, t = 4, 12
    lengths = torch.tensor([12, 9, 5, 3])
    stop = (torch.arange(t)[None] >= lengths[:, None] - 1).float()
    return {"x": torch.randn(b, t, 6, generator=g), "lengths": lengths, "mel": torch.randn(b, t, 5, generator=g),
            "stop": stop, "linear": torch.randn(b, t, 12, generator=g),
            "enc_masks": [(torch.rand(b, t, 8, generator=g) >= 0.5).float() for _ in range(2)]}


def _blocks_step(model, batch, reduction):
    out = model(batch["x"], batch["lengths"], batch["enc_masks"])
    return _blocks_loss(out, batch, reduction)


TACO = {
    "rtvc": ("rtvc", dict(SMALL_RTVC, tacotron_dropout_rate=0.5, tacotron_zoneout_rate=0.1)),
    "rayhane": ("rayhane", dict(SMALL_RAYHANE, predict_linear=True, mask_decoder=True, outputs_per_step=2,
                                tacotron_dropout_rate=0.5, tacotron_zoneout_rate=0.1)),
}


def _taco_model(variant: str, sync: bool) -> Tacotron2:
    preset, cfg = TACO[variant]
    return Tacotron2(preset, n_symbols=N_SYM, sync_batch_norm=sync, **cfg)


def _keep(shape, rate, g):
    return (torch.rand(shape, generator=g) >= rate).float()


def _taco_batch(model: Tacotron2, g):
    hp = model.hparams
    b, t_in, t_out, r = 4, 7, 12, hp.outputs_per_step
    steps = t_out // r
    targets_lengths = torch.tensor([12, 9, 5, 3])
    batch = {
        "inputs": torch.randint(1, N_SYM, (b, t_in), generator=g),
        "input_lengths": torch.tensor([7, 5, 4, 2]),
        "mel": torch.randn(b, t_out, hp.num_mels, generator=g),
        "stop": (torch.arange(t_out)[None] >= targets_lengths[:, None] - 1).float(),
        "targets_lengths": targets_lengths,
        "noise": {
            "prenet": [_keep((b, steps, s), 0.5, g) for s in hp.prenet_layers],
            "encoder_convolutions": [_keep((b, t_in, hp.enc_conv_channels), 0.5, g)
                                     for _ in range(hp.enc_conv_num_layers)],
            "encoder_LSTM": [_keep((b, t_in, hp.encoder_lstm_units), 0.1, g) for _ in range(4)],
            "decoder_LSTM": [_keep((b, steps, hp.decoder_lstm_units), 0.1, g) for _ in range(2 * hp.decoder_layers)],
            "postnet_convolutions": [_keep((b, t_out, hp.postnet_channels), 0.5, g)
                                     for _ in range(hp.postnet_num_layers)],
        },
    }
    if hp.speaker_embedding_size:
        batch["speaker"] = torch.randn(b, hp.speaker_embedding_size, generator=g)
    if hp.predict_linear:
        batch["linear"] = torch.randn(b, t_out, hp.num_freq, generator=g)
    return batch


def _taco_step(model, batch, reduction):
    out = model(batch["inputs"], batch["input_lengths"], batch.get("speaker"), batch["mel"], None, batch["noise"])
    return tacotron2_loss(model, out, batch["mel"], batch["stop"], batch["targets_lengths"], batch.get("linear"),
                          reduction=reduction)["loss"]


class NativeNet(nn.Module):
    """TAC, GaussianEmbedding and ContrastiveLoss in one model whose forward returns the summed loss."""

    def __init__(self):
        super().__init__()
        self.tac = TAC(4, hidden_dim=6)
        self.gauss = GaussianEmbedding(7, 5, 0)
        self.decoder = nn.Linear(4, 6)
        self.contrastive = ContrastiveLoss(in_dim=4, proj_dim=6, num_negatives=3, reduce="sum")

    def forward(self, tac_x, valid_mics, text, durs, gauss_targets, frames, spec, spec_masks, negatives):
        tac_loss = (self.tac(tac_x, valid_mics) ** 2).mean(dim=(1, 2, 3, 4)).mean()
        u = self.gauss(text, durs)
        gauss_loss = masked_mse(gauss_targets[:, :u.shape[1]], u, frames, outputs_per_step=1)
        decoded = self.decoder(spec.transpose(1, 2))
        c_loss = self.contrastive(spec, spec_masks, decoded, negative_indices=negatives)
        return tac_loss + gauss_loss + 0.01 * c_loss


def _native_batch(g):
    b = 4
    text = torch.randint(2, 7, (b, 7), generator=g)
    text[:, ::2] = 1
    durs = torch.randint(0, 4, (b, 7), generator=g)
    durs[:, 0] = 1
    text[3, 3:], durs[3, 3:] = 0, 0  # a short last row: rank 1's frame axis is shorter than the global one
    frames = durs.sum(1)
    spec_masks = torch.zeros(b, 4, 10)
    spec_masks[:, :, 2:7] = 1
    return {"args": [torch.randn(b, 3, 4, 5, 2, generator=g), torch.tensor([3, 2, 1, 3]), text, durs,
                     torch.randn(b, int(frames.max()), 5, generator=g), frames, torch.randn(b, 4, 10, generator=g),
                     spec_masks],
            "negatives": torch.stack([torch.randperm(5, generator=g)[:3] for _ in range(5)])}


def _native_step(model, batch):
    return model(*batch["args"], batch["negatives"])


def _ge2e_batch(g):
    return {"mels": torch.randn(12, 9, 8, generator=g)}  # 4 speakers x 3 utterances, speaker-major


def _ge2e_model():
    return SpeakerEncoder(mel_n_channels=8, model_hidden_size=8, model_num_layers=2, model_embedding_size=6)


# -- splitting the global batch -----------------------------------------------------------------------------------

def _rows(x, lo: int, hi: int):
    """Rows ``lo:hi`` (axis 0) of every tensor of a nest."""
    if isinstance(x, torch.Tensor):
        return x[lo:hi]
    if isinstance(x, dict):
        return {k: _rows(v, lo, hi) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_rows(v, lo, hi) for v in x)
    return x


def _half(batch, rank):
    out = _rows(batch, 2 * rank, 2 * rank + 2)
    if "negatives" in batch:  # shared by every utterance (same-utterance sampling), not per row
        out["negatives"] = batch["negatives"]
    return out


def _snapshot(model, loss) -> dict:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {"loss": torch.as_tensor(loss).detach().clone(), "state": state}


# -- the distributed side -------------------------------------------------------------------------------------

def _ddp_step(model, run):
    """One SGD step of ``DistributedDataParallel(model)`` on the loss ``run(ddp)``."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    loss = run(ddp)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return _snapshot(model, loss)


def _helper_checks(rank: int) -> dict:
    out = {"world_size": tl_dist.world_size(), "is_distributed": tl_dist.is_distributed()}
    # gather along dim 1 with unequal sizes (2 here, 3 there); gradient: d(sum(w * gathered)) summed over ranks
    x = torch.full((2, 2 + rank, 3), float(rank + 1), requires_grad=True)
    gathered = tl_dist.gather_embeddings(x, dim=1)
    weights = torch.arange(gathered.numel(), dtype=torch.float32).view(gathered.shape)
    (gathered * weights).sum().backward()
    out["gathered"] = gathered.detach()
    out["gather_grad"] = x.grad
    out["global_sum"] = tl_dist.global_sum(torch.tensor([1.0, float(rank)]))
    try:
        masked_mse(torch.zeros(1, 5, 2), torch.zeros(1, 5, 2), torch.tensor([3]), outputs_per_step=2)
    except ValueError as e:
        out["odd_time_error"] = str(e)
    # a per-replica loss is the rank's own value; a global one the same on every rank
    t, o = torch.zeros(1, 4, 2), torch.full((1, 4, 2), float(rank + 1))
    lengths = torch.tensor([2 + 2 * rank])
    out["per_replica"] = masked_mse(t, o, lengths, outputs_per_step=2, reduction="per_replica")
    out["global"] = masked_mse(t, o, lengths, outputs_per_step=2)
    return out


def _worker(rank: int, world: int, port: int, setup_path: str, out_dir: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    try:
        setup = torch.load(setup_path, weights_only=True)
        res = {"helpers": _helper_checks(rank)}

        m = BlocksNet(sync=True)
        m.load_state_dict(setup["blocks"]["state"])
        half = _half(setup["blocks"]["batch"], rank)
        res["blocks"] = _ddp_step(m.train(), lambda ddp: _blocks_step(ddp, half, "global"))

        for variant in TACO:
            m = _taco_model(variant, sync=True)
            m.load_state_dict(setup[variant]["state"])
            half = _half(setup[variant]["batch"], rank)
            res[variant] = _ddp_step(m.train(), lambda ddp, h=half: _taco_step(ddp, h, "global"))

        m = _taco_model("rtvc", sync=False)
        m.load_state_dict(setup["rtvc"]["state"])
        half = _half(setup["rtvc"]["batch"], rank)
        res["towers"] = _ddp_step(m.train(), lambda ddp: _taco_step(ddp, half, "per_replica"))

        m = NativeNet()
        m.load_state_dict(setup["native"]["state"])
        half = _half(setup["native"]["batch"], rank)
        res["native"] = _ddp_step(m.train(), lambda ddp: _native_step(ddp, half))

        res["ge2e"] = _ge2e_ddp(rank, setup["ge2e"])
        torch.save(res, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _ge2e_ddp(rank: int, setup: dict) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = _ge2e_model()
    model.load_state_dict(setup["state"])
    speakers = (0, 3) if rank == 0 else (3, 4)  # 3 speakers here, 1 there
    mels = setup["batch"]["mels"][3 * speakers[0]:3 * speakers[1]]
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    local = ddp(mels).view(speakers[1] - speakers[0], 3, -1)
    embeds = tl_dist.gather_embeddings(local)
    loss, _ = ddp.module.loss(embeds, compute_eer=False)  # (the EER is a function of the similarity matrix)
    opt.zero_grad()
    loss.backward()
    sim = ddp.module.similarity_matrix(embeds).detach()
    ddp.module.do_gradient_ops()
    opt.step()
    snap = _snapshot(model, loss)
    snap["sim"] = sim
    return snap


# -- the single-process side ---------------------------------------------------------------------------------

def _sgd(model) -> None:
    """``torch.optim.SGD(lr=LR).step()``, written out (the same ops; spares the test process importing
    ``torch._dynamo``, which ``torch.optim`` does on first use)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.add_(p.grad, alpha=-LR)


def _single_step(model, loss_fn) -> dict:
    loss = loss_fn(model)
    loss.backward()
    _sgd(model)
    return _snapshot(model, loss)


def _towers_reference(state: dict, batch: dict) -> list[dict]:
    """The original's multi-GPU step in one process: each half batch through its own copy (own batch statistics),
    the mean of the two half losses; returns what each rank should hold (shared weights, its own statistics)."""
    copies = []
    for rank in range(WORLD):
        m = _taco_model("rtvc", sync=False).train()
        m.load_state_dict(state)
        loss = _taco_step(m, _half(batch, rank), "per_replica")
        loss.backward()
        copies.append((m, loss))
    ref = copies[0][0]
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.grad = sum(dict(c.named_parameters())[name].grad for c, _ in copies) / WORLD
    _sgd(ref)
    mean_loss = sum(loss for _, loss in copies) / WORLD
    out = []
    for m, loss in copies:
        state_after = {k: v.detach().clone() for k, v in ref.state_dict().items()}
        state_after.update({k: v.detach().clone() for k, v in m.named_buffers()})
        out.append({"loss": loss.detach(), "mean_loss": mean_loss.detach(), "state": state_after})
    return out


def _setup() -> dict:
    g = torch.Generator().manual_seed(7)
    torch.manual_seed(0)
    setup = {"blocks": {"state": BlocksNet(sync=False).state_dict(), "batch": _blocks_batch(g)}}
    for variant in TACO:
        torch.manual_seed(1)
        m = _taco_model(variant, sync=False)
        setup[variant] = {"state": m.state_dict(), "batch": _taco_batch(m, g)}
    torch.manual_seed(2)
    setup["native"] = {"state": NativeNet().state_dict(), "batch": _native_batch(g)}
    torch.manual_seed(3)
    setup["ge2e"] = {"state": _ge2e_model().state_dict(), "batch": _ge2e_batch(g)}
    return setup


def _references(setup: dict) -> dict:
    ref = {}
    m = BlocksNet(sync=True).train()
    m.load_state_dict(setup["blocks"]["state"])
    ref["blocks"] = _single_step(m, lambda mm: _blocks_step(mm, setup["blocks"]["batch"], "global"))
    for variant in TACO:
        m = _taco_model(variant, sync=True).train()
        m.load_state_dict(setup[variant]["state"])
        ref[variant] = _single_step(m, lambda mm, v=variant: _taco_step(mm, setup[v]["batch"], "global"))
    ref["towers"] = _towers_reference(setup["rtvc"]["state"], setup["rtvc"]["batch"])
    m = NativeNet().train()
    m.load_state_dict(setup["native"]["state"])
    ref["native"] = _single_step(m, lambda mm: _native_step(mm, setup["native"]["batch"]))
    m = _ge2e_model()
    m.load_state_dict(setup["ge2e"]["state"])
    embeds = m(setup["ge2e"]["batch"]["mels"]).view(4, 3, -1)
    loss, _ = m.loss(embeds, compute_eer=False)
    loss.backward()
    sim = m.similarity_matrix(embeds).detach()
    m.do_gradient_ops()
    _sgd(m)
    ref["ge2e"] = _snapshot(m, loss)
    ref["ge2e"]["sim"] = sim
    return ref


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _max_state_diff(a: dict, b: dict) -> tuple[float, str]:
    assert a.keys() == b.keys()
    worst, where = 0.0, ""
    for k in a:
        if a[k].is_floating_point():
            d = float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0
            if d > worst:
                worst, where = d, k
    return worst, where


def _run_distributed(tmp) -> tuple[list[dict], dict, dict]:
    """Runs every distributed check in one spawn of two gloo processes and computes the single-process
    references meanwhile. Returns ``(per-rank results, references, setup)``."""
    setup = _setup()
    setup_path = str(tmp / "setup.pt")
    torch.save(setup, setup_path)
    ctx = mp.spawn(_worker, args=(WORLD, _free_port(), setup_path, str(tmp)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + SPAWN_DEADLINE_S
    try:
        refs = _references(setup)
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                pytest.fail(f"the DDP workers did not finish within {SPAWN_DEADLINE_S} s")
    finally:
        for p in ctx.processes:  # ours only, by handle: a hung or failed run leaves nothing behind
            if p.is_alive():
                p.kill()
                p.join(5)
    return [torch.load(str(tmp / f"rank{r}.pt"), weights_only=True) for r in range(WORLD)], refs, setup


def _check_global_steps(results, refs, setup, failures: list[str]) -> None:
    for name in ("blocks", "rtvc", "rayhane", "native", "ge2e"):
        ref = refs[name]
        for rank, res in enumerate(results):
            diff, where = _max_state_diff(res[name]["state"], ref["state"])
            if diff > TOL:
                failures.append(f"{name} rank {rank}: max |diff| of the weights and statistics {diff:.3e} at {where}")
        # every rank reports the global batch's loss; NativeNet's TAC and ContrastiveLoss terms are per-rank
        # means (equal batches), so there the mean of the ranks' losses is the global loss
        losses = [float(r[name]["loss"]) for r in results]
        if name == "native":
            losses = [sum(losses) / WORLD]
        for value in losses:
            if abs(value - float(ref["loss"])) > TOL * max(1.0, abs(float(ref["loss"]))):
                failures.append(f"{name}: loss {value} != single-process {float(ref['loss'])}")
        moved, _ = _max_state_diff(ref["state"], setup[name]["state"])
        if moved <= 100 * TOL:  # the step moved the weights by far more than the tolerance: the check has power
            failures.append(f"{name}: the step moved the weights by {moved:.3e} only")
    for rank, res in enumerate(results):  # every rank has the global batch's similarity matrix (hence its EER)
        diff = float((res["ge2e"]["sim"] - refs["ge2e"]["sim"]).abs().max())
        if diff > TOL:
            failures.append(f"ge2e rank {rank}: similarity matrix differs by {diff:.3e}")


def _check_towers(results, refs, failures: list[str]) -> None:
    for rank, res in enumerate(results):
        want = refs["towers"][rank]
        diff, where = _max_state_diff(res["towers"]["state"], want["state"])
        if diff > TOL:
            failures.append(f"towers rank {rank}: max |diff| from the simulation {diff:.3e} at {where}")
        if abs(float(res["towers"]["loss"]) - float(want["loss"])) > TOL * max(1.0, abs(float(want["loss"]))):
            failures.append(f"towers rank {rank}: loss {float(res['towers']['loss'])} != {float(want['loss'])}")
    # per-tower statistics and the mean of the towers' losses are another step than the global batch's
    other, _ = _max_state_diff(results[0]["towers"]["state"], refs["rtvc"]["state"])
    if other <= 1e-4:
        failures.append(f"towers: the per-tower step is within {other:.3e} of the global step")


def _check_helpers(results, failures: list[str]) -> None:
    want = torch.cat([torch.full((2, 2, 3), 1.0), torch.full((2, 3, 3), 2.0)], dim=1)
    weights = torch.arange(want.numel(), dtype=torch.float32).view(want.shape)
    for rank, res in enumerate(results):
        h = res["helpers"]
        checks = {
            "world_size / is_distributed": h["world_size"] == 2 and h["is_distributed"],
            # rank 0 holds (2, 2, 3) of ones, rank 1 (2, 3, 3) of twos: concatenated along dim 1 in rank order
            "gather_embeddings": torch.equal(h["gathered"], want),
            # both ranks weight the gathered tensor alike: each rank's gradient is twice its slot's weights
            "gather_embeddings gradient": torch.equal(h["gather_grad"], 2 * (weights[:, :2] if rank == 0
                                                                            else weights[:, 2:])),
            "global_sum": torch.equal(h["global_sum"], torch.tensor([2.0, 1.0])),
            "time axis not a multiple of r": "inside a data-parallel replica" in h.get("odd_time_error", "")
            and "multiple of outputs_per_step=2" in h.get("odd_time_error", ""),
            # rank 0: 2 valid frames x 2 channels of error 1; rank 1: 4 x 2 of error 4 -> (4 + 32) / 12 globally
            "per_replica value": float(h["per_replica"]) == float(rank + 1) ** 2,
            "global value": abs(float(h["global"]) - 36.0 / 12) <= 1e-6,
        }
        failures.extend(f"helpers rank {rank}: {k}" for k, ok in checks.items() if not ok)


def test_ddp_steps_equal_single_process_steps(tmp_path):
    """One spawn for every distributed check (points 1, 3, 4, 5 of the module docstring); one test so that
    ``pytest -n`` runs the spawn once."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results, refs, setup = _run_distributed(tmp_path)
    finally:
        torch.set_num_threads(threads)
    failures: list[str] = []
    _check_global_steps(results, refs, setup, failures)
    _check_towers(results, refs, failures)
    _check_helpers(results, failures)
    assert not failures, "\n".join(failures)


def test_without_process_group_everything_is_single_process():
    """No process group: ``sync_batch_norm=True`` is plain batch norm and both reductions are today's values,
    bit for bit (outputs, losses, gradients and moving statistics)."""
    assert not tl_dist.is_distributed() and tl_dist.world_size() == 1
    g = torch.Generator().manual_seed(3)
    torch.manual_seed(0)
    plain = _taco_model("rayhane", sync=False).train()
    synced = _taco_model("rayhane", sync=True).train()
    synced.load_state_dict(plain.state_dict())
    batch = _taco_batch(plain, g)
    losses = []
    for m, reduction in ((plain, "per_replica"), (synced, "global")):
        loss = _taco_step(m, batch, reduction)
        loss.backward()
        losses.append(loss)
    assert torch.equal(losses[0], losses[1])
    for (name, a), b in zip(plain.named_parameters(), synced.parameters()):
        assert torch.equal(a.grad, b.grad), name
    for (name, a), b in zip(plain.named_buffers(), synced.buffers()):
        assert torch.equal(a, b), name
    # the helpers are identities
    x = torch.randn(2, 3)
    assert tl_dist.gather_embeddings(x) is x and tl_dist.global_sum(x) is x
    assert torch.equal(tl_dist.all_gather_with_grad(x), x[None])
    # switching sync on afterwards, and its check
    tl_dist.set_sync_batch_norm(plain)
    assert all(m.sync_batch_norm for m in plain.modules() if type(m).__name__ == "TFBatchNorm")
    with pytest.raises(ValueError, match="sync_batch_norm"):
        Conv1DBlock(2, 3, 4, sync_batch_norm="yes")
    with pytest.raises(ValueError, match="`reduction`"):
        masked_mse(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1), torch.tensor([2]), outputs_per_step=1,
                   reduction="mean")


def test_scripted_blocks_and_losses_keep_working_with_the_new_keywords():
    """TorchScript compiles the blocks and losses with the new keywords (a scripted one computes locally)."""
    from torch_layers import MaskedMSE

    torch.manual_seed(0)
    block = Conv1DBlock(3, 2, 4, sync_batch_norm=True).train()
    scripted = torch.jit.script(copy.deepcopy(block))
    x = torch.randn(2, 5, 3)
    assert torch.equal(scripted(x), block(x))
    assert torch.equal(scripted.batch_norm.running_var, block.batch_norm.running_var)
    loss = torch.jit.script(MaskedMSE(outputs_per_step=2, reduction="per_replica"))
    t = torch.randn(2, 4, 3)
    assert torch.equal(loss(t, t + 1, torch.tensor([4, 1])), masked_mse(t, t + 1, torch.tensor([4, 1]),
                                                                         outputs_per_step=2))
