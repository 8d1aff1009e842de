"""A sync in every step: a metrics loop reads 300 small GPU values back with .item(); between
them the GPU has nothing queued while the host waits in cudaStreamSynchronize.
Expected advice: sync_stalls."""

import os

import torch

DEV = os.environ.get("STALLSCOPE_GPU_CHECK_DEVICE", "cuda")

model = torch.nn.Linear(256, 256).to(DEV)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device=DEV)
for _ in range(30):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    total = 0.0
    for p in range(300):
        total += (x[p % 64] * 2).sum().item()
    opt.step()
