"""Many tiny kernels queued back to back: a CUDA graph of 2,000 in-place adds on 256 floats is
replayed every step; the GPU runs them one after another with a small gap between each, the
next kernel always already launched. Expected advice: small_kernels."""

import os

import torch

DEV = os.environ.get("STALLSCOPE_GPU_CHECK_DEVICE", "cuda")
N = 2000

x = torch.zeros(256, device=DEV)
w = torch.nn.Parameter(torch.ones(256, device=DEV))
opt = torch.optim.SGD([w], lr=0.01)


def tiny():
    for _ in range(N):
        x.add_(1.0)


if DEV == "cuda":
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tiny()  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tiny()
    run = graph.replay
else:  # the CPU smoke run (tests/gpu/check.py --cpu) only checks that the script runs
    run = tiny

for _ in range(30):
    run()
    loss = (w * x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
