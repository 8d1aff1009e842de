"""Shape churn: every step allocates a buffer of a new size (32..160 MiB) and gives the cache
back with empty_cache(): reserved memory shrinks and cudaMalloc runs inside steps.
Expected advice: allocator_churn."""

import os

import torch

DEV = os.environ.get("STALLSCOPE_GPU_CHECK_DEVICE", "cuda")

model = torch.nn.Linear(1024, 1024).to(DEV)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    rows = 8192 * (1 + step % 5)  # 32, 64, ... 160 MiB of float32
    x = torch.randn(rows, 1024, device=DEV)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    del x, loss
    if DEV == "cuda":
        torch.cuda.empty_cache()
