"""The compute-bound Lightning script's plain-loop twin (same model, batch and sizes)."""

import torch
from common import Sleepy, arg
from torch.utils.data import DataLoader

compute = arg("compute", 512)
net = torch.nn.Sequential(torch.nn.Linear(16, compute), torch.nn.ReLU(),
                          torch.nn.Linear(compute, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for batch in DataLoader(Sleepy(arg("items", 48), 0), batch_size=4):
    x, y = batch["x"].repeat(16, 1), batch["y"].repeat(16, 1)
    loss = ((net(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
