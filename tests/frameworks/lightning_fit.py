"""Lightning's Trainer, automatic optimization (training_step and backward run inside
optimizer.step(closure)). `--accum N` accumulate_grad_batches, `--devices 2` strategy="ddp"
(Lightning re-launches this script per rank), `--compute N` makes each step compute-bound,
`--iterable 1` serves the items from an IterableDataset without a length (Lightning's fetcher
then fetches one batch ahead)."""

import lightning as L
import torch
from common import Sleepy, Stream, arg, record
from torch.utils.data import DataLoader

accum, devices, compute = arg("accum", 1), arg("devices", 1), arg("compute", 0)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, compute or 16), torch.nn.ReLU(),
                                       torch.nn.Linear(compute or 16, 1))

    def training_step(self, batch, i):
        x = batch["x"].repeat(16, 1) if compute else batch["x"]
        y = batch["y"].repeat(16, 1) if compute else batch["y"]
        return ((self.net(x) - y) ** 2).mean()

    def on_train_batch_end(self, outputs, batch, i):
        if (i + 1) % accum == 0:
            record(step=self.trainer.global_step, batches=accum, rank=self.global_rank)
            print(f"rank={self.global_rank} global_step={self.trainer.global_step}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Data(L.LightningDataModule):
    def train_dataloader(self):
        items = Sleepy(arg("items", 48), 0 if compute else 0.001)
        items = Stream(items) if arg("iterable", 0) else items
        return DataLoader(items, batch_size=4)


trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=devices,
                    strategy="ddp" if devices > 1 else "auto", accumulate_grad_batches=accum,
                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, num_sanity_val_steps=0)
trainer.fit(Model(), datamodule=Data())
