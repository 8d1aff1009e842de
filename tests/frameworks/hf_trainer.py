"""HF Trainer on a config-built tiny model (nothing downloaded): max_steps optimizer steps;
`--accum N` sets gradient_accumulation_steps, `--workers N` dataloader_num_workers."""

import torch
from common import Sleepy, arg, record
from transformers import Trainer, TrainerCallback, TrainingArguments


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 1)

    def forward(self, x, y):
        return {"loss": ((self.net(x) - y) ** 2).mean()}


class Record(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        record(step=state.global_step, batches=args.gradient_accumulation_steps)


args = TrainingArguments(
    output_dir=arg("out", "hf_out"), max_steps=arg("steps", 30),
    per_device_train_batch_size=4, gradient_accumulation_steps=arg("accum", 1),
    dataloader_num_workers=arg("workers", 0), report_to=[], save_strategy="no",
    logging_strategy="no", use_cpu=True, disable_tqdm=True)
trainer = Trainer(model=Tiny(), args=args, train_dataset=Sleepy(512), callbacks=[Record()])
trainer.train()
