"""A DDP communication hook that reduces each gradient bucket as precsim's simulated all-reduce does,
so that a real torch.distributed job gets, for example, NCCL's ring in BF16 bit for bit."""
import torch
import torch.distributed as dist

import precsim

from ._tensors import as_numpy


def allreduce_hook(algorithm="ring", format="bf16", average="ddp", hook="none"):
    """A hook for model.register_comm_hook(state, hook) (state: a process group or None for the
    default group). Each bucket's local gradients are all-gathered from every rank (any backend
    with all_gather; the tests use gloo), reduced by precsim.allreduce in rank order with these
    settings, and this rank's result replaces the bucket. average "ddp" (the default) averages as
    DDP does: g * (1/W) in FP32, cast into the buffer, summed."""
    precsim.Format(format)  # bad names fail at registration, not in the middle of a backward

    def comm_hook(state, bucket):
        group = state if state is not None else dist.group.WORLD
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        local = bucket.buffer()
        gathered = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(gathered, local.contiguous(), group=group)
        r = precsim.allreduce([as_numpy(g, "bucket") for g in gathered], algorithm=algorithm, format=format,
                              average=average, hook=hook)
        fut = torch.futures.Future()
        fut.set_result(torch.from_numpy(r["ranks"][rank]).to(local.dtype))
        return fut

    return comm_hook
