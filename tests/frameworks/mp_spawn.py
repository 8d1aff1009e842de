"""torch.multiprocessing.spawn of two DDP ranks (gloo, CPU), each over its own DataLoader."""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from common import Sleepy, record
from torch.utils.data import DataLoader


def train(rank, world, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(DataLoader(Sleepy(32), batch_size=4), 1):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        record(step=step, rank=rank)
    print(f"rank={rank} global_step={step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(train, args=(2, port), nprocs=2)
