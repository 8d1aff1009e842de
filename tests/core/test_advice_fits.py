"""Fixes fitted to the code that ran (issue 33), on the shared real traces and their twins:
compiled code is never told to use torch.compile, exposed communication gets the fix of its
collective kind, the accelerator's own words, commands that name the real script."""

from __future__ import annotations

import pytest
from fixture_twins import analyzed, complete, document

from stallscope.core.advice.registry import graph_words
from stallscope.core.analysis import analyze
from stallscope.core.render.text import render
from stallscope.core.trace import load


def _card(report, card_id):
    return next(a for a in report.advice + report.withheld if a.id == card_id)


def test_compiled_regions_get_compiled_code_fixes(real_trace):
    """HTA's df_index_resolver runs 5 CompiledFunction + 5 CompiledFunctionBackward regions."""
    report = analyze(load(real_trace("hta_df_index_resolver")))
    for card_id in ("host_bound", "backward_bound"):
        fix = _card(report, card_id).fix
        assert "already runs compiled code (10 CompiledFunction / Torch-Compiled Region " \
               "events)" in fix, fix
        assert 'mode="reduce-overhead"' in fix and "compiled_autograd" in fix
        assert "torch.compile or" not in fix and "fuse them with torch.compile" not in fix


def test_graph_replays_are_told_to_capture_more(real_trace):
    """HTA's negative_queue trace replays 70 cudaGraphLaunch calls."""
    report = analyze(load(real_trace("hta_negative_queue")))
    fix = _card(report, "host_bound").fix
    assert "already replays CUDA graphs (70 cudaGraphLaunch calls)" in fix, fix
    assert "torch.compile or" not in fix
    # its largest cause is queued work in long gaps (streams, collectives): the headline says
    # so, compiled or not
    low = next(h for h in report.headlines if h.id == "low_utilization")
    assert low.fix.startswith("Queued work waits on other streams"), low.fix


def test_plain_eager_code_is_still_told_to_compile(real_trace):
    report = analyze(load(real_trace("hta_nccl_parser")))
    assert "torch.compile or CUDA graphs" in _card(report, "host_bound").fix


@pytest.mark.parametrize(("prefix", "opening"), [
    ("hta_df_index_resolver", "Gradient all-reduce (DDP) runs bare"),     # ncclKernel_AllReduce
    ("tracelens_resnet", "Gradient all-reduce (DDP) runs bare"),  # Generic kernel, nccl:all_reduce
    ("hta_sampled_rank-0", "All-to-all (sharded embeddings"),  # SendRecv kernel, nccl:all_to_all
])
def test_exposed_communication_gets_the_fix_of_its_collective(real_trace, prefix, opening):
    report = analyze(load(real_trace(prefix)))
    assert _card(report, "exposed_comm").fix.startswith(opening)


def test_send_recv_without_all_to_all_is_a_pipeline(tmp_path):
    """The sampled rank with its CPU-side all-to-all renamed to point-to-point sends."""
    doc = document("hta_sampled_rank-0")
    for e in complete(doc):
        if "all_to_all" in e["name"] or "alltoall" in e["name"]:
            e["name"] = "nccl:send"
    report = analyzed(doc, tmp_path / "p2p.json")
    assert _card(report, "exposed_comm").fix.startswith("Pipeline send/recv runs bare")


def test_an_mtia_trace_gets_no_cuda_words(real_trace):
    report = analyze(load(real_trace("hta_mtia")))
    assert graph_words(report) == ("MTIA graph", "graph capture, where the MTIA runtime offers it")
    assert "CUDA" not in render(report)


def test_commands_name_the_script_the_frames_run(tmp_path):
    """kineto's ResNet-50 (data-loading bound) with its script's `<module>` frame: the commands
    to paste name train_slow.py, never a placeholder."""
    doc = document("kineto_nw0")
    xs = complete(doc)
    lo = min(e["ts"] for e in xs)
    hi = max(e["ts"] + e.get("dur", 0) for e in xs)
    main = next(e for e in xs if e["name"].startswith("ProfilerStep#"))
    doc["traceEvents"].append({"ph": "X", "cat": "python_function", "pid": main["pid"],
                               "tid": main["tid"], "name": "train_slow.py(19): <module>",
                               "ts": lo, "dur": hi - lo, "args": {}})
    report = analyzed(doc, tmp_path / "framed.json")
    assert report.script == "train_slow.py"
    fix = _card(report, "dataloader_bound").fix
    assert "stallscope-cli run --set num_workers=2 -- train_slow.py" in fix, fix
    assert "stallscope-cli tune -- train_slow.py" in fix
    assert "-- script.py" not in render(report) and "your_script.py" not in render(report)


def test_a_copy_from_pinned_memory_is_not_told_to_pin(real_trace):
    """HTA's negative_queue trace: aten::to copies HtoD (Pinned -> Device) and still spends the
    CPU in cudaMemcpyAsync; the card names the copies and asks for non_blocking, not pin_memory."""
    report = analyze(load(real_trace("hta_negative_queue")))
    card = _card(report, "host_bound")
    assert "copies Memcpy HtoD (Pinned -> Device)" in card.culprits[0].detail
    assert card.fix.startswith("aten::to spends the CPU in cudaMemcpyAsync although it copies "
                               "from pinned memory: pass .to(device, non_blocking=True)")
    assert "pin_memory=True" not in card.fix


@pytest.mark.parametrize(("frame", "kind"), [
    ("transformers/image_transforms.py(377): normalize", "preprocessing"),
    ("image_processing_vit.py(141): rescale", "preprocessing"),
    ("train.py(80): log_metrics", "logging"),
    ("nn.Module: ResNet_0", "model"),
    ("model.py(52): forward", "model"),
    ("train.py(12): step", ""),
])
def test_the_python_cards_fix_follows_what_the_frame_does(frame, kind):
    from stallscope.core.advice.fixes import python_kind
    assert python_kind(frame) == kind


@pytest.mark.parametrize(("frame", "tier"), [
    ("triton/knobs.py(29): get", 0),          # a library Kineto shortened: not "your line"
    ("transformers/trainer.py(2240): train", 0),
    ("mypkg/model.py(3): forward", 1),        # a package of the user's
    ("train.py(45): step", 2),
])
def test_your_line_skips_libraries_by_module_name(frame, tier):
    from stallscope.core.kineto import frame_tier
    assert frame_tier(frame) == tier


def test_a_compute_bound_cpu_script_gets_a_cpu_compute_card(tmp_path):
    """No GPU: 10 steps of 10 ms, each 9 ms of aten::addmm and a 0.5 ms optimizer step (the
    Lightning / HF CPU scripts of issue 33 read CPU ops 87-91%)."""
    from synthetic_traces import Synth, steps
    b = Synth()
    for t0 in steps(b, 10, 10_000.0):
        b.x("aten::addmm", "cpu_op", t0 + 100.0, 9_000.0)
        b.x("Optimizer.step#AdamW.step", "user_annotation", t0 + 9_200.0, 500.0)
    report = analyzed({"traceEvents": b.events}, tmp_path / "cpu.json")
    assert not report.devices and report.advisable
    card = report.advice[0]
    assert card.id == "host_bound" and card.title == "CPU operators take most of each step"
    assert card.culprits[0].name == "aten::addmm"
    assert card.fix.startswith("The steps are CPU compute: compile the model (torch.compile")
    assert "one per physical core of the training machine" in card.fix
    assert "The heaviest: aten::addmm" in card.fix


def test_a_fused_optimizer_is_not_told_to_fuse(tmp_path):
    """The same CPU script whose AdamW step runs aten::_fused_adamw_ (HF Trainer's
    adamw_torch_fused): the card says it is fused already."""
    from synthetic_traces import Synth, steps
    b = Synth()
    for t0 in steps(b, 10, 10_000.0):
        b.x("aten::addmm", "cpu_op", t0 + 100.0, 4_000.0)
        b.x("Optimizer.step#AdamW.step", "user_annotation", t0 + 4_200.0, 5_000.0)
        b.x("aten::_fused_adamw_", "cpu_op", t0 + 4_300.0, 4_800.0)
    report = analyzed({"traceEvents": b.events}, tmp_path / "fused.json")
    fix = _card(report, "optimizer_bound").fix
    assert "AdamW is already fused" in fix and "fused=True" not in fix


def test_mtia_culprits_speak_of_mtia_ops(real_trace):
    report = analyze(load(real_trace("hta_mtia")))
    details = [c.detail for cs in report.culprits.values() for c in cs]
    assert any("tiny MTIA ops" in d for d in details), details
    assert not any("GPU" in d for d in details)


def test_a_launch_bound_compiled_step_gets_the_compiled_headline(tmp_path):
    """HTA's df_index_resolver (compiled regions) with its all-reduce kernels removed: GPU idle
    mostly to launches, so the headline's first fix speaks of compiled code."""
    doc = document("hta_df_index_resolver")
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ncclKernel")]
    report = analyzed(doc, tmp_path / "nocomm.json")
    low = next(h for h in report.headlines if h.id == "low_utilization")
    stats = report.devices[1]
    assert max(stats.idle_by_cause, key=stats.idle_by_cause.__getitem__) == "backward"
    assert low.fix.startswith("The step already runs compiled code: make its launches cheaper")
    assert "torch.compile or" not in low.fix
