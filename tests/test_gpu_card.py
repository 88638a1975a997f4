"""``benchmarks/gpu_card.py``, the prepared GPU measurement: its ``--smoke`` run (every section's code at tiny shapes on
the CPU, so the script cannot rot between lent GPUs), and, fast, its plan, its watchdog, the targets it reads and the
card it renders."""

import doctest
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


@pytest.fixture
def gpu_card(monkeypatch):
    """The script as a module (it imports its sibling scripts by name)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_card")


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timeout(960)  # the smoke run's own limit (900 s, below) and the test's checks
def test_smoke_run_fills_every_section_and_target(built_all, tmp_path):
    out = tmp_path / "card"
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_card.py"), "--smoke", "--data", str(built_all), "--out", str(out)],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    card = json.loads((out / "gpu_card.json").read_text())
    assert card["finished"] and card["smoke"] and card["device"] == "cpu"
    sections = {s["name"]: s for s in card["sections"]}
    assert list(sections) == ["correctness", "loglik-1b", "host-1b", "generate-1b", "loglik-8b", "generate-8b", "card-8b"]
    assert {s["status"] for s in sections.values()} == {"ok"}, {n: (s["status"], s["error"]) for n, s in sections.items()}
    correctness = sections["correctness"]["figures"]
    assert correctness["compared"] == 8 and correctness["agree"] == 8 and correctness["max_abs_delta"] == 0.0  # CPU twice
    for size in ("1b", "8b"):
        loglik = sections[f"loglik-{size}"]["figures"]
        assert loglik["questions"] == 8 and len(loglik["rounds"]) == 1
        round_ = loglik["rounds"][0]
        # physprobe runs each question's prefix once: fewer tokens than lm-eval, which runs every option whole
        assert 0 < round_["physprobe"]["tokens"] < round_["lm-eval"]["tokens"]
        assert round_["physprobe"]["seconds"] > 0 and round_["lm-eval"]["seconds"] > 0 and 0 <= round_["agreement"] <= 1
        assert round_["physprobe"]["busy"] is None and round_["physprobe"]["peak_gib"] is None  # no CUDA: not measured
        generated = sections[f"generate-{size}"]["figures"]["rounds"][0]
        assert {b: g["rows"] for b, g in generated.items()} == {"newton": 4, "cccons": 2}  # 1 row of each config
        for g in generated.values():
            assert 0 <= g["identical"] <= g["rows"] and g["physprobe"]["slots"] > 0 and g["lm-eval"]["seconds"] > 0
    host = sections["host-1b"]["figures"]
    assert host["command"]["status"] == "ok" and host["busy"] is None and host["busy_error"] is None  # no CUDA: no sample
    assert [(r["benchmark"], r["protocol"], r["rows"]) for r in host["runs"]] == [("prost", "released-gpt", 8)]
    commands = sections["card-8b"]["figures"]["commands"]
    assert [(c["benchmarks"], c["limit"], c["status"]) for c in commands] == [(["prost"], 8, "ok"), (["all"], 2, "ok")]
    assert [(r["benchmark"], r["protocol"], r["rows"]) for r in commands[0]["runs"]] == [("prost", "released-gpt", 8)]
    scored = {r["benchmark"]: r for r in commands[1]["runs"]}  # the whole card in one command, 2 rows per config
    assert set(scored) == {"prost", "cccons", "newton", "text2afford"}
    assert scored["prost"]["rows"] == 2 and scored["newton"]["rows"] == 2 * scored["newton"]["configs"]
    assert scored["text2afford"]["protocol"] == "yes-no-falcon"  # the causal default: the folder's name matches no model pattern
    assert all(r["scoring_s"] > 0 and r["rows"] > 0 for c in commands for r in c["runs"])
    assert len(card["targets"]) == 11
    assert {t["status"].split(" (")[0] for t in card["targets"]} <= {"met", "not met", "not measured"}
    markdown = (out / "gpu_card.md").read_text()
    assert "Smoke run" in markdown and all(t["target"] in markdown for t in card["targets"])
    assert "## The host's share at 1.1B" in markdown and "| prost (whole) | ok | 8 |" in markdown
    assert (out / "gpu_card.log").read_text().count("section ") >= 14
    print(f"smoke wall time: {wall:.0f} s")


def test_gpu_plan_fits_nine_minutes_with_on_device_setup(gpu_card):
    # on_device.sh installs the wheels and builds the benchmarks (~35 s) before the script starts; 9 minutes in all
    assert gpu_card.GPU.budget_s + 35 <= 9 * 60
    assert set(gpu_card.GPU.budgets) == set(gpu_card.SMOKE.budgets) == {"setup", *gpu_card.SECTIONS}
    assert gpu_card.GPU.correctness_questions == 400 and gpu_card.GPU.whole_prost_limit is None
    assert gpu_card.GPU.dtype == "bfloat16" and gpu_card.SMOKE.dtype == "float32"


def test_arguments_are_checked_before_any_work(gpu_card, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        gpu_card.main(["--data", str(tmp_path), "--out", str(tmp_path / "o"), "--smoke", "--sections", "loglik-1b,loglik-3b"])
    assert exit_.value.code == 2 and "unknown loglik-3b" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu_card.main(["--data", str(tmp_path), "--out", str(tmp_path / "o"), "--smoke"])
    assert "no built cccons, newton, prost, text2afford; run `physprobe build all" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _context(gpu_card, tmp_path, budgets: dict, runs: int = 3):
    plan = gpu_card.dataclasses.replace(gpu_card.SMOKE, budgets=budgets, runs=runs)
    card = gpu_card.Card(smoke=True, device="cpu", gpu=None, dtype="float32", versions={}, shapes={}, started="now",
                         budget_s=plan.budget_s, plan={})  # fmt: skip
    writer = gpu_card.Writer(tmp_path / "out", card)
    return gpu_card.Context(plan, "cpu", tmp_path, tmp_path, writer)


def test_a_section_past_its_deadline_times_out_keeping_its_figures_and_the_next_runs(gpu_card, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_card, "MIN_SECTION_S", 0.2)

    def endless(ctx, figures):
        figures["rounds"] = [1]  # a round done before the deadline
        while True:
            time.sleep(0.01)

    def broken(ctx, figures):
        raise ValueError("row 7: no option text\nsecond line")

    sections = {"endless": endless, "broken": broken, "quick": lambda ctx, figures: figures.update(done=True)}
    # The sections after the endless one have time to spare however busy the machine (each ends at once, and
    # time a section leaves unspent passes on): only the endless one meets its deadline.
    ctx = _context(gpu_card, tmp_path, {"setup": 0, "endless": 0.5, "broken": 60, "quick": 60})
    started = time.monotonic()
    gpu_card.run_sections(ctx, list(sections), sections, started=time.monotonic())
    assert time.monotonic() - started < 60  # the endless section was stopped at its deadline
    ctx.writer.close()
    results = {s["name"]: s for s in json.loads((tmp_path / "out" / "gpu_card.json").read_text())["sections"]}
    assert results["endless"]["status"].startswith("timed out") and results["endless"]["figures"] == {"rounds": [1]}
    assert results["broken"]["status"] == "failed" and results["broken"]["error"] == "ValueError: row 7: no option text"
    assert results["quick"]["status"] == "ok" and results["quick"]["figures"] == {"done": True}
    markdown = (tmp_path / "out" / "gpu_card.md").read_text()
    assert "| endless | timed out at 0 s |" in markdown and "| broken | failed |" in markdown
    assert "Traceback" in (tmp_path / "out" / "gpu_card.log").read_text()


def test_a_section_left_no_time_is_skipped(gpu_card, tmp_path):
    sections = {"late": lambda ctx, figures: pytest.fail("ran without time")}
    ctx = _context(gpu_card, tmp_path, {"setup": 0, "late": 2})
    gpu_card.run_sections(ctx, ["late"], sections, started=time.monotonic() - 10)
    assert ctx.writer.card.sections[0].status == "skipped: the run's budget is spent"
    ctx.writer.close()


def test_rounds_stop_when_the_next_would_pass_the_deadline(gpu_card, tmp_path):
    ctx = _context(gpu_card, tmp_path, {"setup": 0}, runs=3)
    ctx.section_deadline = time.monotonic() + 0.5
    record = []
    ctx.rounds(record, lambda: time.sleep(0.3) or {"round": len(record)})
    assert record == [{"round": 0}]
    ctx.section_deadline = time.monotonic() + 60
    ctx.rounds(record, lambda: {"round": len(record)})
    assert len(record) == 4  # a quick round: all three
    ctx.writer.close()


def test_a_failed_command_fails_its_section_and_a_late_one_times_it_out(gpu_card):
    ok = {"status": "ok", "error": None}
    gpu_card.finished([("a", ok), ("b", ok)])
    with pytest.raises(gpu_card.CommandFailed, match="^b: failed \\(exit 2\\): physprobe: error: no such protocol$"):
        gpu_card.finished(
            [
                ("a", {"status": "timed out after 9 s", "error": None}),
                ("b", {"status": "failed (exit 2)", "error": "physprobe: error: no such protocol"}),
            ]
        )
    with pytest.raises(gpu_card.TimedOut):
        gpu_card.finished([("a", ok), ("b", {"status": "skipped: no time left in the section", "error": None})])


def _loglik(lm_eval_s: float, physprobe_s: float, busy=None, busy_error=None) -> dict:
    tool = {"tokens": 60_000, "attention_flops": 0.0, "peak_gib": 20.0}
    round_ = {"trunk_tokens_s": 40_000.0, "agreement": 1.0, "physprobe": {**tool, "seconds": physprobe_s, "busy": busy, "busy_error": busy_error},
              "lm-eval": {**tool, "tokens": 159_000, "seconds": lm_eval_s, "busy": 0.5}}  # fmt: skip
    return {"size": "8b", "shape": "s", "questions": 1000, "non_embedding": 7e9, "matrix_flops": 8e14, "rounds": [round_]}


def _generate(ratios: dict) -> dict:
    counts = {"prompt": 1000, "slots": 16_000, "attention": 0.0, "busy": None, "peak_gib": None}
    round_ = {b: {"rows": 128, "identical": 128, "needed": 16_000, "prompt": 1000, "physprobe": {**counts, "seconds": 1.0},
                  "lm-eval": {**counts, "seconds": r}} for b, r in ratios.items()}  # fmt: skip
    return {
        "size": "1b",
        "shape": "s",
        "rows_per_config": 32,
        "non_embedding": 1e9,
        "matrix_flops": 8e14,
        "trunk_tokens_s": 1e5,
        "rounds": [round_],
    }


def test_targets_are_read_from_the_card_met_not_met_or_not_measured(gpu_card):
    md = importlib.import_module("gpu_card_md")
    prost = {
        "benchmarks": ["prost"],
        "limit": None,
        "status": "ok",
        "wall_s": 61.0,
        "error": None,
        "runs": [
            {"benchmark": "prost", "protocol": "released-gpt", "rows": 18736, "load_s": 9.0, "scoring_s": 35.2, "configs": 1}
        ],
    }
    card = {"sections": [
        {"name": "correctness", "status": "ok", "figures": {"questions": 400, "devices": ["cpu", "cuda"], "runs": {}, "compared": 400,
                                                            "agree": 398, "max_abs_delta": 1e-5}},
        {"name": "loglik-1b", "status": "ok", "figures": {**_loglik(3.5, 1.0, busy=0.75), "size": "1b"}},
        {"name": "loglik-8b", "status": "timed out at 85 s", "figures": _loglik(4.0, 2.0, busy_error="NVMLError: not supported")},
        {"name": "generate-1b", "status": "ok", "figures": _generate({"newton": 2.5, "cccons": 1.5})},
        {"name": "card-8b", "status": "ok", "figures": {"save_s": 12.0, "model": "m", "commands": [prost]}},
    ]}  # fmt: skip
    found = {t["target"]: (t["figure"], t["status"]) for t in md.targets(card)}
    assert found["log-likelihood (PROST paper format) ≥ 3× lm-eval at 1.1B"] == ("3.50×", "met")
    assert found["log-likelihood (PROST paper format) ≥ 2.5× lm-eval at 8B"] == (
        "2.00×",
        "not met",
    )  # a timed-out section's rounds count
    # 60,000 tokens / 2 s = 30,000 tokens/s of the trunk's 40,000; MFU 2 x 7e9 x 60,000 / 2 s / 8e14 = 52%
    assert found["physprobe's fed tokens/s ≥ 80% of the dense trunk's saturation at 8B (≈ 50% MFU)"] == (
        "75% (MFU 52%)",
        "not met",
    )
    assert found["GPU busy ≥ 70% of physprobe's scoring phase at 1.1B"] == ("75%", "met")
    assert found["GPU busy ≥ 70% of physprobe's scoring phase at 8B"] == ("-", "not measured (NVMLError: not supported)")
    assert found["generation (NEWTON, CConS) ≥ 2× lm-eval at 1.1B"] == ("newton 2.50×, cccons 1.50×", "not met")
    assert found["generation (NEWTON, CConS) ≥ 2× lm-eval at 8B"] == ("-", "not measured (section generate-8b not run)")
    assert found["whole PROST (released-gpt, 18,736 questions) at 8B ≤ 40 s of scoring"][1] == "met"
    assert found["float32 on CUDA agrees with CPU float32 on ≥ 399 of 400 decisions"] == ("398/400", "not met")
    prost.update(status="timed out after 120 s", wall_s=120.0, runs=[])
    assert md.targets(card)[4]["status"] == "not met"  # still scoring after 120 s: more than 40 s of it, whatever loading took
    prost.update(status="timed out after 70 s", wall_s=70.0)
    assert md.targets(card)[4]["status"].startswith("not measured")  # cut too soon to tell
    markdown = md.render(card)
    assert (
        "| whole PROST (released-gpt, 18,736 questions) at 8B ≤ 40 s of scoring | - | not measured (whole PROST timed out after 70 s) |"
        in markdown
    )
    assert "| physprobe | 2.00/2.00/2.00 | 60,000 | 30,000 | 52% | 75% | 2.00/2.00/2.00 | - | 20.0 |" in markdown
    assert "| newton | physprobe | 1.00/1.00/1.00 | 2.50/2.50/2.50 | 16,872 |" in markdown


def test_helper_examples(gpu_card):
    for name in ("gpu_card_md", "score_vs_lm_eval"):
        assert doctest.testmod(importlib.import_module(name)).failed == 0
