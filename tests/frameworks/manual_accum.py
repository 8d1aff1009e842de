"""A plain loop with gradient accumulation: optimizer.step() every `--accum` batches."""

import torch
from common import Sleepy, arg, record
from torch.utils.data import DataLoader

accum = arg("accum", 4)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Sleepy(48), batch_size=4)
for i, batch in enumerate(loader):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
        record(step=(i + 1) // accum, batches=accum)
