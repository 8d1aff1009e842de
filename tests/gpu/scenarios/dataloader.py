"""DataLoader-bound: every item sleeps 2 ms in the main process (num_workers=0), the model is
tiny: the GPU waits for data. Expected advice: dataloader_bound."""

import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

DEV = os.environ.get("STALLSCOPE_GPU_CHECK_DEVICE", "cuda")


class Slow(Dataset):
    def __len__(self):
        return 16 * 40

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(512), torch.randn(512)


model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 512)).to(DEV)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=16, num_workers=0):
    x, y = x.to(DEV), y.to(DEV)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
