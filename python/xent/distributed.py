"""The vocabulary-parallel loss (Megatron's tensor-parallel output layer):
each rank of a torch.distributed group holds a slice of the class axis, in
rank order; every rank gets the loss (and lse) of the whole vocabulary and
the gradient of its own slice, with label smoothing over the whole
vocabulary, and the per-token outputs (entropy, log-prob, argmax) of the
whole vocabulary. xent's one collective per call, an all-gather of four
values per row (a few more with per-token outputs), runs through
torch.distributed on the group (gloo on CPU tensors, NCCL on CUDA ones)."""

import torch
import torch.distributed as dist

from . import _cross_entropy
from ._autograd import Stats


class _Shard:
    """This rank's slice: its first class and the whole vocabulary, from the
    slices' sizes gathered once per call; and the all-gather xent calls."""

    def __init__(self, group, local_classes, device):
        self.group = group
        self.rank = dist.get_rank(group)
        self.ranks = dist.get_world_size(group)
        on = device if dist.get_backend(group) == "nccl" else torch.device("cpu")
        mine = torch.tensor([local_classes], dtype=torch.int64, device=on)
        sizes = [torch.empty_like(mine) for _ in range(self.ranks)]
        dist.all_gather(sizes, mine, group=group)
        sizes = [int(s.item()) for s in sizes]
        self.offset = sum(sizes[:self.rank])
        self.global_classes = sum(sizes)

    def all_gather(self, workspace, send, recv, nbytes):
        """Gathers nbytes from every rank into recv, rank by rank; recv (and
        send, its own part) lie in the call's workspace tensor."""
        start = recv - workspace.data_ptr()
        total = nbytes * self.ranks
        if start < 0 or start + total > workspace.numel() or send != recv + self.rank * nbytes:
            raise RuntimeError("the gathered statistics are not where the workspace says")
        parts = list(workspace[start:start + total].split(nbytes))
        dist.all_gather(parts, parts[self.rank].clone(), group=self.group)


def cross_entropy(logits_shard, target, group=None, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0, *, z_loss=0.0, softcap=0.0, all_ignored_zero=False, invalid_labels="raise",
                  loss_dtype=None, inplace_backward=False, return_lse=False, temperature=1.0, return_entropy=False,
                  return_logprob=False, return_argmax=False, token_weight=None, token_weight_mean="weights"):
    """xent.cross_entropy over a vocabulary split across `group` (default:
    the whole world). logits_shard: this rank's [N, C_rank] (or [N, C_rank,
    d1, ...]); the ranks' slices are consecutive in rank order and may
    differ in size. target: global class indices (the same on every rank),
    or this rank's slice of the target probabilities. weight: [C] of the
    whole vocabulary. Every rank must make the same call; each gets the same
    loss and the gradient of its own slice. temperature and return_entropy,
    return_logprob, return_argmax are xent.cross_entropy's, of the whole
    vocabulary: each rank gets the same entropy, log-prob and argmax (a
    global class index), bit for bit, from the same one all-gather (its
    records wider when these are asked for), and the entropy's and
    log-prob's gradients join the loss's in its slice. A temperature per
    row and token_weight, token_weight_mean: every rank passes the same
    rows' values."""
    group = group if group is not None else dist.group.WORLD
    if logits_shard.dim() < 2:
        raise ValueError("xent.distributed: logits_shard must be [N, C_rank] or [N, C_rank, d1, ...]")
    shard = _Shard(group, logits_shard.shape[1], logits_shard.device)
    return _cross_entropy(logits_shard, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap,
                          all_ignored_zero, invalid_labels, loss_dtype, inplace_backward, return_lse, shard,
                          temperature, Stats(bool(return_entropy), bool(return_logprob), bool(return_argmax)),
                          token_weight, token_weight_mean)
