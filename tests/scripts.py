"""The small user training scripts that tests run under the runner, written in one place.

    source = training(items=192, item_s=0.005, step_s=0.06)   # data wait ~40% without workers
    script = write_script(tmp_path, source)                    # runner_helpers.write_script

Every script is the same shape a user would write: a Dataset `Slow` whose items sleep `item_s`
(data loading off the CPU, so its cost holds whatever the machine's load), one DataLoader named
`loader` on the line `loader = DataLoader(...)`, a linear model stepped by SGD, and a loop of
`epochs` epochs (or forever) that sleeps `step_s` a step as its compute; `iterable=True` makes
`Slow` an IterableDataset whose __iter__ yields the same items. The keyword hooks add
what a test needs at fixed places: `head` after the imports, `before_loop` after the loader,
`in_step` after `opt.step()`, `after_epoch` after each epoch.
"""

from __future__ import annotations

import textwrap


def training(*, items: int = 64, item_s: float = 0.0, dim: int = 8, batch: int = 8,
             loader: str = "num_workers=0", epochs: int = 1, forever: bool = False,
             iterable: bool = False, step_s: float = 0.0, head: str = "", before_loop: str = "",
             in_step: str = "", after_epoch: str = "") -> str:
    fetch = f"time.sleep({item_s!r})" if item_s else ""
    compute = f"time.sleep({step_s!r})" if step_s else ""
    loop = "while True:" if forever else f"for epoch in range({epochs}):"
    item = f"torch.randn({dim}), torch.randn(1)"
    dataset = [
        "class Slow(IterableDataset):",
        "    def __iter__(self):",
        f"        for i in range({items}):",
        _block(fetch, 12),
        f"            yield {item}",
    ] if iterable else [
        "class Slow(Dataset):",
        "    def __len__(self):",
        f"        return {items}",
        "    def __getitem__(self, i):",
        _block(fetch, 8),
        f"        return {item}",
    ]
    lines = [
        "import sys, time, torch",
        "from torch.utils.data import DataLoader, Dataset"
        + (", IterableDataset" if iterable else ""),
        "",
        _block(head + "\n", 0) if head else None,
        *dataset,
        "",
        f"model = torch.nn.Linear({dim}, 1)",
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)",
        f"loader = DataLoader(Slow(), batch_size={batch}, {loader})",
        _block(before_loop, 0),
        loop,
        "    for x, y in loader:",
        "        loss = ((model(x) - y) ** 2).mean()",
        "        opt.zero_grad()",
        "        loss.backward()",
        "        opt.step()",
        _block(in_step, 8),
        _block(compute, 8),
        _block(after_epoch, 4),
        "",
    ]
    return "\n".join(line for line in lines if line is not None)


def line_of(source: str, prefix: str) -> int:
    """The 1-based number of the first line of `source` that starts with `prefix`."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.startswith(prefix))


def _block(code: str, indent: int) -> str | None:
    """`code` dedented and indented to `indent`; None (no line at all) when there is none."""
    return textwrap.indent(textwrap.dedent(code).strip("\n"), " " * indent) if code else None


# A Dataset whose heaviest line is known by construction: `x / 255.0` divides a whole 3x720x1280
# image into a new tensor (1-2 ms), the lines beside it touch four values (microseconds), so no
# preemption of a loaded machine can make another line the top one. (An in-place div_ of the
# whole image beside it took 1.1-1.7 ms against the out-of-place 1.1-1.8 ms: the top line was
# a coin toss under load, and flipped in CI.)
NORM_DATASET = '''\
class NormDataset(Dataset):
    def __init__(self, n):
        self.n = n
        self.buf = torch.ones(3, 720, 1280)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = self.buf
        a = x / 255.0
        b = x[0, 0, :4].div_(255.0)
        return a[0, 0, :4] + b + i
'''


# The script times itself: from before the loop to after it, and its time inside next().
_CLOCKED = """
import json, sys, time, torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return {steps}
    def __getitem__(self, i):
        {fetch}
        return i

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
loader = DataLoader(Items(), batch_size=None)
clock = time.perf_counter
waited = 0.0
t0 = clock()
it = iter(loader)
while True:
    a = clock()
    try:
        x = next(it)
    except StopIteration:
        break
    waited += clock() - a
    opt.step()
print("CLOCK " + json.dumps({{"elapsed": clock() - t0, "waited": waited}}), flush=True)
"""


def clocked_loop(steps: int, fetch: str = "pass") -> str:
    """A tight loop over a DataLoader that prints its own clock ("CLOCK {elapsed, waited}"):
    `steps` items, each fetch running `fetch` (e.g. "time.sleep(0.005)")."""
    return _CLOCKED.format(steps=steps, fetch=fetch)
