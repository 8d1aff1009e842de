"""Shared by the framework scripts: a Dataset that sleeps a known time per item, a tiny model,
and the script's own record (one JSON line per optimizer step it saw) for the tests to compare."""

import json
import os
import sys
import time

import torch
from torch.utils.data import Dataset, IterableDataset

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class Sleepy(Dataset):
    """n items of (x: 16 floats, y: 1 float); each item sleeps `sleep_s`."""

    def __init__(self, n=64, sleep_s=0.001):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(16, generator=g), "y": torch.randn(1, generator=g)}


class Stream(IterableDataset):
    """The items of a Dataset as a stream without a length."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for i in range(len(self.items)):
            yield self.items[i]


def record(**fields):
    """One line of the script's own record, to the file named by FRAMEWORK_RECORD."""
    path = os.environ.get("FRAMEWORK_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(fields) + "\n")


def arg(name, default):
    """`--name value` from the script's argv (the scripts take few options)."""
    argv = sys.argv[1:]
    return type(default)(argv[argv.index(f"--{name}") + 1]) if f"--{name}" in argv else default
