"""An accelerate loop (its own example style): prepare() re-creates the DataLoader and fetches
one batch ahead; `--accum N` uses accelerator.accumulate."""

import torch
from accelerate import Accelerator
from common import Sleepy, arg, record
from torch.utils.data import DataLoader

accum = arg("accum", 1)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=accum)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Sleepy(40), batch_size=4)
model, opt, loader = accelerator.prepare(model, opt, loader)
steps = 0
for batch in loader:
    with accelerator.accumulate(model):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
    if accelerator.sync_gradients:
        steps += 1
        record(step=steps, batches=accum)
print(f"accelerate steps={steps}", flush=True)
