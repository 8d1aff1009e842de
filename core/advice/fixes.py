"""Fixes fitted to the trace: numbers from it instead of placeholders (num_workers from the
measured per-batch data cost and the step's compute, capped at the cores like tune's ladder),
pin_memory only with a GPU, the optimizer's own class, the fix for the op that issued a sync,
ROCm's hip* names on ROCm traces."""

from __future__ import annotations

import math
import os
import re

from stallscope.core.advice.registry import Context
from stallscope.core.capture.overrides import change_line
from stallscope.core.kineto import (
    ALL_TO_ALL_CPU,
    COLLECTIVE_KINDS,
    SEND_RECV_CPU,
    is_collective_name,
)
from stallscope.core.report import Culprit
from stallscope.core.session.steady import busiest_loader
from stallscope.core.units import duration

# torch.optim classes with foreach=; those with fused= as well (CUDA, ROCm; CPU from torch 2.4)
FOREACH = frozenset({"Adadelta", "Adafactor", "Adagrad", "Adam", "Adamax", "AdamW", "ASGD",
                     "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"})
FUSED = frozenset({"Adagrad", "Adam", "AdamW", "SGD"})
FUSED_OP_PREFIX = "aten::_fused_"  # aten::_fused_adamw_, aten::_fused_sgd_: a fused step ran
HF_TRAINER_FILE = "transformers/trainer.py"  # a frame of the Hugging Face Trainer's loop
STEP_RE = re.compile(r"^Optimizer\.step#(?P<cls>[\w.]+)\.step$")
ZERO_GRAD_RE = re.compile(r"^Optimizer\.zero_grad#")
READBACK_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
                "aten::equal", "aten::any", "aten::all")
COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_", "aten::cpu", "aten::numpy_T")


UNCAPPED = 1 << 10  # a bare trace's workers: tune's ladder without this machine's cap


def usable_cores() -> int:
    """The cores this process may run on (what tune's num_workers ladder climbs to)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def rung(n: int, cores: int) -> int:
    """The smallest of tune's ladder (1, 2, 4, 8 ... the cores) at or above n."""
    top = max(1, cores)
    k = 1
    while k < n and k < top:
        k *= 2
    return min(k, top)


# ----------------------------------------------------------------------------- DataLoader

def loader_numbers(ctx: Context) -> tuple[float, float] | None:
    """(data µs per batch on the main thread, compute µs per step besides it), when measured."""
    r = ctx.report
    batches = r.loader_batches
    data_us = float((r.phases["data_loading"][:, 1] - r.phases["data_loading"][:, 0]).sum()) \
        if len(r.phases.get("data_loading", [])) else 0.0
    if batches <= 0 or data_us <= 0:
        return None
    if r.steps:
        compute = sum(s.dur_us - s.data_loading_us for s in r.steps) / len(r.steps)
    else:
        compute = (r.window_us - data_us) / batches
    return data_us / batches, max(compute, 0.0)


def dataloader_fix(ctx: Context, culprits: list[Culprit]) -> tuple[str, str]:
    """(evidence sentence, fix) for the DataLoader card."""
    numbers = loader_numbers(ctx)
    # A session records the cores of the machine it ran on (run.json `cpu_count`): they cap
    # the workers. A session from before that ran here; a bare trace came from a machine
    # whose cores it does not record: no number, no cap.
    session = bool(ctx.loaders)
    if ctx.cores:
        cores, machine = ctx.cores, f"the training machine's {ctx.cores} cores"
    elif session:
        cores = usable_cores()
        machine = f"this machine's {cores} cores"
    else:
        cores, machine = UNCAPPED, "the training machine's cores"
    single = not any("_MultiProcessing" in c.name for c in culprits)
    pin = ", pin_memory=True" if ctx.gpu else ""
    if numbers is None:
        return "", (f"Load batches in worker processes: DataLoader(num_workers=N with N up to "
                    f"{machine}, persistent_workers=True{pin}).")
    per_batch, compute = numbers
    said = (f" Each batch costs the main thread {duration(per_batch)} while a step computes "
            f"for {duration(compute)} besides it.")
    if single:
        need = math.ceil(per_batch / compute) + 1 if compute > 0 else cores
        n = rung(need, cores)
        why = (f"{n} worker{'s' if n != 1 else ''} prepare batches while the step computes "
               f"({duration(per_batch)} of loading per {duration(compute)} of compute; "
               f"at most one per core of the training machine)")
    else:
        n = rung(2 * max(1, math.ceil(per_batch / compute)) if compute > 0 else cores, cores)
        why = (f"the loader already has worker processes and still keeps each step waiting "
               f"{duration(per_batch)}: try more of them (up to {machine})")
    loader = busiest_loader(ctx.loaders)
    current = int((loader.get("effective") or {}).get("num_workers") or 0)
    n = rung(current + 1, cores) if n <= current else n  # never the value already set
    if n <= current:  # as many workers as cores already: more cannot help
        return said, (f"The loader already runs {current} workers on {machine}, "
                      f"and each step still waits {duration(per_batch)} for its "
                      f"batch: more workers cannot help, each batch must get cheaper"
                      + ("." if loader.get("effective", {}).get("persistent_workers")
                         else " (and persistent_workers=True keeps the workers across "
                              "epochs)."))
    fix = (f"Load batches ahead of the step: DataLoader(num_workers={n}, "
           f"persistent_workers=True{pin}, prefetch_factor=4): {why}.")
    if loader.get("iterable") and current == 0:
        fix += (f" {loader.get('dataset') or 'The dataset'} is an IterableDataset: each worker "
                "iterates the whole stream unless its __iter__ takes its own share "
                "(torch.utils.data.get_worker_info().id of .num_workers), else every sample "
                "comes once per worker.")
    if loader.get("site"):  # a session's run: the user's own line, and --set aimed at it
        fix += (f" The line to change: {change_line(loader, {'num_workers': n})}. Try it "
                f"without editing the script: stallscope-cli run {ctx.place}--set "
                f"{loader['site']}:num_workers={n} -- {ctx.script}, or let stallscope-cli tune "
                f"{ctx.place}-- {ctx.script} find the best settings.")
    else:
        fix += (f" Try it without editing the script: stallscope-cli run {ctx.place}--set "
                f"num_workers={n} -- {ctx.script}, or let stallscope-cli tune {ctx.place}-- "
                f"{ctx.script} find the best settings.")
    return said, fix


# ----------------------------------------------------------------------------- sync

def sync_fix(ctx: Context, culprits: list[Culprit]) -> str:
    calls = " / ".join(ctx.rt(n) for n in ("cudaDeviceSynchronize", "cudaStreamSynchronize",
                                           "cudaMemcpy"))
    generic = (f"Avoid host-device syncs inside the loop ({calls}): no .item(), .cpu(), "
               ".numpy() or printing tensors every step; accumulate on the GPU and read back "
               "every N steps.")
    top = culprits[0] if culprits else None
    if top is None:
        return generic
    issued = _issuer(top.detail)
    where = f" at {top.frame}" if top.frame else ""
    if issued.startswith(READBACK_OPS):
        head = (f"{issued}{where} reads a GPU value back to Python every step (.item(), a "
                "tensor in an `if`, a Python number from a loss): keep running sums on the "
                "GPU and read them every N steps.")
    elif issued.startswith(COPY_OPS) and "DtoH" in top.detail:
        head = (f"{issued}{where} copies a GPU tensor to the host and waits for it (.cpu(), "
                ".numpy(), .tolist()): keep it on the GPU, or copy with non_blocking=True into "
                "a pinned buffer and read it a step later.")
    elif issued.startswith(COPY_OPS) and "HtoD" in top.detail:
        head = (f"{issued}{where} copies host memory to the GPU and waits: use pinned memory "
                "(DataLoader(pin_memory=True)) and .to(device, non_blocking=True).")
    elif not issued and "Device" in top.name:
        head = (f"{top.name}{where} is called directly: torch.cuda.synchronize() in the loop "
                "(often timing code) stops the CPU until the GPU is done: remove it, or call "
                "it every N steps.")
    elif "Event" in top.name:
        head = (f"{top.name}{where}: event.synchronize() / elapsed_time() inside the loop "
                "waits for the GPU: read timings every N steps.")
    else:
        return generic
    return head + " " + generic


def _issuer(detail: str) -> str:
    m = re.search(r"issued by ([^;]+)", detail)
    return m.group(1).strip() if m else ""


# ----------------------------------------------------------------------------- optimizer

def optimizer_fix(ctx: Context, culprits: list[Culprit]) -> str:
    classes = [m.group("cls") for c in culprits if (m := STEP_RE.match(c.name))]
    ops = [c.name for c in culprits if c.kind == "op"]
    zero_first = bool(culprits) and ZERO_GRAD_RE.match(culprits[0].name) is not None
    parts = []
    if zero_first or any(o in ("aten::zero_", "aten::fill_") for o in ops[:2]):
        parts.append("optimizer.zero_grad(set_to_none=True) (the default from torch 2.0): "
                     "zeroing every gradient (aten::zero_ / fill_ per parameter) is host "
                     "time the GPU waits for")
    fused_ops = any(o.startswith(FUSED_OP_PREFIX) for o in ops)
    trainer = any(HF_TRAINER_FILE in n for n in ctx.report.trace.names)
    for cls in dict.fromkeys(classes):
        short = cls.rsplit(".", 1)[-1]
        if "fused" in short.lower() or fused_ops:
            parts.append(f"{short} is already fused: its time is the host side of the step; "
                         "fewer, larger parameter groups or stepping less often (gradient "
                         "accumulation) leave less of it")
        elif short in FOREACH and trainer:
            parts.append(f"the Hugging Face Trainer builds this {short}: choose its step with "
                         "TrainingArguments(optim=\"adamw_torch_fused\") (or another fused / "
                         "foreach optim name) rather than constructing the optimizer yourself")
        elif short in FOREACH:
            fused = (" or fused=True (one kernel per parameter group)"
                     if short in FUSED else "")
            if any(o.startswith("aten::_foreach_") for o in ops):
                parts.append(f"{short} already runs multi-tensor (aten::_foreach_* ops)"
                             + (f"; torch.optim.{short}(..., fused=True) does the step in one "
                                "kernel per group" if short in FUSED else ""))
            else:
                parts.append(f"use a multi-tensor step: torch.optim.{short}(..., "
                             f"foreach=True){fused}")
        else:
            parts.append(f"{short} is not a torch.optim class: look for its own foreach / "
                         "fused / multi-tensor option")
    if not parts:
        parts.append("use a multi-tensor optimizer (foreach=True or fused=True on "
                     "torch.optim's Adam, AdamW, SGD, Adagrad) and "
                     "optimizer.zero_grad(set_to_none=True)")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


# ----------------------------------------------------------------------------- launches

def launch_fix(ctx: Context, culprits: list[Culprit], who: str) -> str:
    """host_bound / backward_bound: what the heaviest op does, then the general fix."""
    general = compiled_fix(ctx, who) or (
        f"{who} cannot launch work fast enough: bigger batches, fewer small ops, "
        f"torch.compile or {ctx.graphs} to launch fewer, larger kernels.")
    top = culprits[0] if culprits else None
    if top is None:
        return general
    copy = ctx.rt("cudaMemcpyAsync")
    if copy in top.detail and top.name in COPY_OPS and ctx.gpu and "DtoH" in top.detail:
        return (f"{top.name} spends the CPU in {copy} copying device memory to the host: copy "
                "into a pinned destination (torch.empty(..., pin_memory=True), "
                ".copy_(x, non_blocking=True)) and read it after an event or a step later, "
                "instead of a blocking .cpu() into pageable memory. " + general)
    if copy in top.detail and top.name in COPY_OPS and ctx.gpu and "(Pinned" in top.detail:
        return (f"{top.name} spends the CPU in {copy} although it copies from pinned memory: "
                "pass .to(device, non_blocking=True) so the host does not wait for each copy, "
                "and copy the next batch ahead of the step (a side stream). " + general)
    if copy in top.detail and top.name in COPY_OPS and ctx.gpu:
        pageable = any(c.name.startswith("Memcpy HtoD (Pageable") for c in
                       ctx.culprits("pageable_h2d"))
        why = ("copies from pageable memory block the host" if pageable else
               "the host waits for its copies")
        return (f"{top.name} spends the CPU in {copy}: {why}; use pinned memory "
                "(DataLoader(pin_memory=True)) and .to(device, non_blocking=True). " + general)
    m = re.search(r"launches ([\d,]+) tiny \w+ ops?, median ([^;]+)", top.detail)
    if m and compiled_fix(ctx, who):
        return (f"{top.name} launches {m.group(1)} tiny kernels (median {m.group(2)}): each "
                "costs more to launch than to run. " + general)
    if m:
        return (f"{top.name} launches {m.group(1)} tiny kernels (median {m.group(2)}): each "
                f"costs more to launch than to run; fuse them with torch.compile, or replay "
                f"the step as one {ctx.graph}, and give each launch more work (bigger "
                "batches).")
    return general


def compiled_fix(ctx: Context, who: str) -> str:
    """The launch fix for code that already runs compiled ("" when it does not): never "use
    torch.compile" to a compiled step."""
    regions, replays = ctx.compiled
    if replays:
        launch = ctx.rt("cudaGraphLaunch")
        return (f"{who} cannot launch work fast enough, and the step already replays "
                f"{ctx.graphs} ({replays:,} {launch} calls): the launches left run outside the "
                "graphs; capture more of the step in them (the optimizer step, the loss, the "
                "input copies), and give each replay more work (bigger batches).")
    if regions:
        return (f"{who} cannot launch work fast enough, and the step already runs compiled "
                f"code ({regions:,} CompiledFunction / Torch-Compiled Region events): compile "
                f"with mode=\"reduce-overhead\" to replay each region as a {ctx.graph}, compile "
                "the backward too (compiled autograd: torch._dynamo.config.compiled_autograd = "
                "True), and look for graph breaks and recompilations "
                "(TORCH_LOGS=\"graph_breaks,recompiles\"), each of which adds regions and "
                "launches.")
    return ""


# What a Python frame does, by its file and function name (the first pattern that matches).
PYTHON_KINDS = (
    ("preprocessing", re.compile(r"transform|image_process|normaliz|rescale|resize|crop|"
                                 r"tokeniz|collate|augment|PIL/|cv2|decode", re.IGNORECASE)),
    ("logging", re.compile(r"logging|logger|\blog_|print|wandb|tensorboard|metric|tqdm",
                           re.IGNORECASE)),
    ("model", re.compile(r"nn\.Module: |\bforward\b|modeling_|torch/nn/modules/")),
)


def python_kind(frame: str) -> str:
    """preprocessing, logging, model or "" for a frame "file(line): func"."""
    return next((kind for kind, pattern in PYTHON_KINDS if pattern.search(frame)), "")


def cpu_compute_fix(ctx: Context, culprits: list[Culprit]) -> str:
    """A CPU-only step made mostly of operators: the model's compute runs on the CPU."""
    compiled = any(ctx.compiled)
    top = culprits[0] if culprits else None
    heaviest = f" The heaviest: {top.name} ({top.detail or duration(top.covered_us)})." \
        if top else ""
    return ("The steps are CPU compute: "
            + ("the model already runs compiled (look for graph breaks: TORCH_LOGS="
               "\"graph_breaks\"); " if compiled else
               "compile the model (torch.compile: fused C++/OpenMP kernels); ")
            + "run the math in bfloat16 where the CPU supports it (torch.autocast(\"cpu\", "
            "dtype=torch.bfloat16)); give each op more work (a larger batch); keep torch's "
            "threads at one per physical core of the training machine (torch.set_num_threads), "
            "with DataLoader workers not competing for them; or train on a GPU." + heaviest)


def python_fix(ctx: Context, culprits: list[Culprit], has_frames: bool) -> str:
    frames = [c.name for c in culprits if c.kind == "frame"][:2]
    if frames:
        where = " and ".join(frames)
        kind = python_kind(frames[0])
        if kind == "preprocessing":
            return (f"The time is CPU preprocessing in {where}: move it into the Dataset so "
                    "DataLoader worker processes run it ahead of the step (num_workers > 0), "
                    "or run it on the GPU (a GPU image processor, torchvision.transforms.v2 on "
                    "device tensors).")
        if kind == "model":
            compiled = any(ctx.compiled)
            return (f"The time is the model's own Python in {where}: "
                    + ("it already runs compiled, so look for graph breaks and recompilations "
                       "(TORCH_LOGS=\"graph_breaks,recompiles\") that leave it in Python."
                       if compiled else
                       "compile it (torch.compile(model)) so that Python runs once per graph, "
                       "not between every op."))
        return (f"The time is Python in {where}: move logging, metrics and bookkeeping there "
                "out of the step (or run them every N steps), and keep tensors on the device "
                "in between.")
    tail = "" if has_frames else "; rerun with --with-stack to see the Python frames"
    return ("Move logging, metrics and Python bookkeeping out of the step (or run them every "
            f"N steps){tail}.")


# ----------------------------------------------------------------------------- communication

# collective kind (core/kineto.py COLLECTIVE_KINDS) -> who issues it and its fix
COMM_FIXES = {
    "all_reduce":
        "Gradient all-reduce (DDP) runs bare: raise DistributedDataParallel(bucket_cap_mb=...) "
        "and set gradient_as_bucket_view=True so buckets reduce while backward still runs; "
        "static_graph=True when the graph never changes; no_sync() on gradient-accumulation "
        "micro-batches.",
    "all_gather":
        "Parameter all-gather (FSDP) runs bare: prefetch the next unit's parameters "
        "(forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE; FSDP2: "
        "set_modules_to_forward_prefetch), and keep them gathered for backward "
        "(reshard_after_forward=False / SHARD_GRAD_OP) where memory allows.",
    "reduce_scatter":
        "Gradient reduce-scatter (FSDP) runs bare: backward_prefetch=BackwardPrefetch."
        "BACKWARD_PRE and larger FSDP units (auto_wrap_policy) give it compute to hide behind.",
    "all_to_all":
        "All-to-all (sharded embeddings, MoE dispatch/combine) runs bare: pipeline it with the "
        "previous batch's compute (torchrec's TrainPipelineSparseDist), or overlap dispatch and "
        "combine with expert compute.",
    "send_recv":
        "Pipeline send/recv runs bare: a schedule with more micro-batches (1F1B, interleaved "
        "1F1B) keeps each stage computing while activations move.",
}
COMM_GENERAL = ("Overlap communication with compute: with DDP tune bucket_cap_mb and set "
                "gradient_as_bucket_view=True; with FSDP enable forward/backward prefetch; "
                "issue fewer, larger collectives.")


def comm_fix(ctx: Context, culprits: list[Culprit]) -> str:
    """The exposed communication's fix by the collective kind that covers most of it."""
    by_kind: dict[str, float] = {}
    for c in culprits:
        kind = collective_kind(ctx, c.name)
        if kind:
            by_kind[kind] = by_kind.get(kind, 0.0) + c.covered_us
    if not by_kind:
        return COMM_GENERAL
    top = max(by_kind, key=by_kind.__getitem__)
    return COMM_FIXES[top] + " Fewer, larger collectives cost less than many small ones."


def collective_kind(ctx: Context, kernel: str) -> str:
    """all_reduce, all_gather, reduce_scatter, all_to_all, send_recv or "" (unknown)."""
    low = kernel.lower()
    kind = next((k for k, keys in COLLECTIVE_KINDS if any(key in low for key in keys)), "")
    names = ctx.report.trace.names
    if not kind:  # a generic kernel (ncclDevKernel_Generic): the one kind the CPU side names
        cpu = {k for n in names if is_collective_name(n) for k, keys in COLLECTIVE_KINDS[:4]
               if any(key in n.lower() for key in keys)}
        return cpu.pop() if len(cpu) == 1 else ""
    if kind != "send_recv":
        return kind
    if any(n.startswith(SEND_RECV_CPU) for n in names):
        return "send_recv"
    if any(m in n.lower() for n in names for m in ALL_TO_ALL_CPU):
        return "all_to_all"
    return ""  # grouped send/recv of an unknown collective: the general fix
