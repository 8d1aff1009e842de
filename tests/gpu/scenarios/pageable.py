"""Pageable copies: each step copies 64 MiB from ordinary (pageable) host memory to the GPU
with .to(device). Expected advice: pageable_h2d."""

import os

import torch

DEV = os.environ.get("STALLSCOPE_GPU_CHECK_DEVICE", "cuda")

host = torch.randn(16, 1024, 1024)  # 64 MiB, not pinned
model = torch.nn.Linear(1024, 1024).to(DEV)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(30):
    x = host.to(DEV)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
