"""The GPU card's figures read back: per-workload summaries, issue 41's targets (met / not met / not measured) and
gpu_card.md, all from the JSON-ready record that ``gpu_card.py`` writes (so a card can be re-rendered from its
gpu_card.json alone: ``python benchmarks/gpu_card_md.py gpu_card.json``).

>>> card = {"sections": [{"name": "correctness", "status": "ok", "figures": {"compared": 400, "agree": 399}}]}
>>> [(t["target"][:40], t["figure"], t["status"]) for t in targets(card)][-2:]
[('float32 on CUDA agrees with CPU float32 ', '399/400', 'met'), ('CPU: paper format ≥ 2.8× lm-eval on the ', '-', 'not measured (a CPU figure: benchmarks/score_vs_lm_eval.py on the 2-core machine)')]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("physprobe", "lm-eval")
SIZES = {"1b": "1.1B", "8b": "8B"}
STARTUP_ALLOWANCE_S = 60  # what a score command's start, model hashing and loading take at most, before it scores


def section(card: dict, name: str) -> dict | None:
    return next((s for s in card.get("sections", []) if s["name"] == name), None)


def spread(values: list[float], digits: int = 2) -> str:
    """min/median/max, as every benchmark here prints repeated measurements ('-' for none).

    >>> spread([3.0, 1.0, 2.0]), spread([])
    ('1.00/2.00/3.00', '-')
    """
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return "/".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def mfu(flops: float, seconds: float | None, matrix: float | None) -> float | None:
    """Model FLOPs over seconds over the card's measured bf16 matrix rate (None where a figure is missing)."""
    return flops / seconds / matrix if seconds and matrix else None


def loglik_summary(figures: dict) -> dict:
    """Per tool, over a log-likelihood section's rounds: seconds, tokens fed, tokens/s (median seconds), MFU (2 x
    non-embedding parameters x tokens fed + causal attention, over the matrix rate), share of the dense trunk's
    saturation, GPU busy (median of the rounds' sampled shares), peak GiB and, per round, lm-eval's seconds over
    the tool's; and the rounds' agreement (identical decisions) with lm-eval."""
    rounds = figures.get("rounds", [])
    trunk = median([r.get("trunk_tokens_s") for r in rounds])
    out = {"rounds": len(rounds), "trunk_tokens_s": trunk, "agreement": [r.get("agreement") for r in rounds]}
    for tool in TOOLS:
        runs = [r[tool] for r in rounds if tool in r]
        if not runs:
            continue
        seconds = [r["seconds"] for r in runs]
        tokens, attention = runs[-1]["tokens"], runs[-1]["attention_flops"]
        typical = median(seconds)
        out[tool] = {"seconds": seconds, "tokens": tokens, "tokens_s": tokens / typical if typical else None,
                     "mfu": mfu(2 * figures["non_embedding"] * tokens + attention, typical, figures.get("matrix_flops")),
                     "saturation": tokens / typical / trunk if typical and trunk else None,
                     "busy": median([r.get("busy") for r in runs]), "busy_error": runs[-1].get("busy_error"),
                     "peak_gib": max((r.get("peak_gib") or 0 for r in runs), default=0) or None,
                     "vs_lm_eval": [r["lm-eval"]["seconds"] / r[tool]["seconds"] for r in rounds if "lm-eval" in r and tool in r]}  # fmt: skip
    return out


def generate_summary(figures: dict) -> dict:
    """Per benchmark and tool, over a generation section's rounds: seconds, tokens fed (prompt + decoding steps),
    MFU, GPU busy, peak GiB, lm-eval's seconds over the tool's; and the texts identical to lm-eval's."""
    rounds = figures.get("rounds", [])
    out = {}
    for benchmark in rounds[0] if rounds else {}:
        runs = [r[benchmark] for r in rounds if benchmark in r]
        last = runs[-1]
        out[benchmark] = {
            "rows": last["rows"],
            "identical": last["identical"],
            "needed": last["needed"],
            "prompt": last["prompt"],
        }
        for tool in TOOLS:
            seconds = [r[tool]["seconds"] for r in runs]
            tokens = last[tool]["prompt"] + last[tool]["slots"] - last["rows"]  # slots count each answer's first token
            typical = median(seconds)
            out[benchmark][tool] = {
                "seconds": seconds, "tokens": tokens, "slots": last[tool]["slots"],
                "mfu": mfu(2 * figures["non_embedding"] * tokens + last[tool]["attention"], typical, figures.get("matrix_flops")),
                "busy": median([r[tool].get("busy") for r in runs]), "peak_gib": max((r[tool].get("peak_gib") or 0 for r in runs), default=0) or None,
                "vs_lm_eval": [r["lm-eval"]["seconds"] / r[tool]["seconds"] for r in runs]}  # fmt: skip
    return out


@dataclass(frozen=True)
class Target:
    """One of issue 41's targets: its words, and how its figure is read from the card (``read``: the figure and
    its text, or None and why it was not measured), met when ``met(figure)``."""

    text: str
    read: Callable[[dict], tuple[float | None, str]]
    met: Callable[[float], bool]


def _measured(card: dict, name: str) -> tuple[dict | None, str]:
    found = section(card, name)
    if found is None:
        return None, f"section {name} not run"
    if not found.get("figures"):
        return None, f"section {name} {found['status']}, no figures"
    return found, ""


def loglik_ratio(size: str) -> Callable[[dict], tuple[float | None, str]]:
    def read(card: dict):
        found, why = _measured(card, f"loglik-{size}")
        if found is None:
            return None, why
        ratio = median(loglik_summary(found["figures"]).get("physprobe", {}).get("vs_lm_eval", []))
        return (ratio, f"{ratio:.2f}×") if ratio is not None else (None, "no round with both tools")

    return read


def loglik_share(size: str, key: str) -> Callable[[dict], tuple[float | None, str]]:
    def read(card: dict):
        found, why = _measured(card, f"loglik-{size}")
        if found is None:
            return None, why
        ours = loglik_summary(found["figures"]).get("physprobe", {})
        share = ours.get(key)
        if share is None and key == "busy":
            return None, ours.get("busy_error") or "no GPU busy figure (no CUDA)"
        if share is None:
            return None, f"no {key} figure"
        extra = f" (MFU {100 * ours['mfu']:.0f}%)" if key == "saturation" and ours.get("mfu") is not None else ""
        return share, f"{100 * share:.0f}%{extra}"

    return read


def generate_ratio(size: str) -> Callable[[dict], tuple[float | None, str]]:
    def read(card: dict):
        found, why = _measured(card, f"generate-{size}")
        if found is None:
            return None, why
        ratios = {b: median(s["physprobe"]["vs_lm_eval"]) for b, s in generate_summary(found["figures"]).items()}
        if not ratios:
            return None, "no round"
        return min(ratios.values()), ", ".join(f"{b} {r:.2f}×" for b, r in ratios.items())

    return read


def whole_prost(card: dict) -> tuple[float | None, str]:
    found, why = _measured(card, "card-8b")
    if found is None:
        return None, why
    command = next((c for c in found["figures"].get("commands", []) if c["benchmarks"] == ["prost"] and c["limit"] is None), None)
    if command is None:
        return None, "the whole-PROST command did not run"
    if command["status"] == "ok":
        seconds = sum(r["scoring_s"] for r in command["runs"])
        return seconds, f"{seconds:.1f} s of scoring ({command['wall_s']:.0f} s with start-up and loading)"
    if command["status"].startswith("timed out") and command["wall_s"] > 40 + STARTUP_ALLOWANCE_S:
        return float(
            "inf"
        ), f"{command['status']}: over 40 s of scoring, even after {STARTUP_ALLOWANCE_S} s of start-up and loading"
    return None, f"whole PROST {command['status']}"


def correctness(card: dict) -> tuple[float | None, str]:
    found, why = _measured(card, "correctness")
    if found is None:
        return None, why
    figures = found["figures"]
    if "agree" not in figures:
        return None, "the two runs did not both finish"
    return figures["agree"] / figures["compared"], f"{figures['agree']}/{figures['compared']}"


TARGETS = (
    Target("log-likelihood (PROST paper format) ≥ 3× lm-eval at 1.1B", loglik_ratio("1b"), lambda r: r >= 3),
    Target("log-likelihood (PROST paper format) ≥ 2.5× lm-eval at 8B", loglik_ratio("8b"), lambda r: r >= 2.5),
    Target("physprobe's fed tokens/s ≥ 80% of the dense trunk's saturation at 1.1B", loglik_share("1b", "saturation"), lambda s: s >= 0.8),
    Target("physprobe's fed tokens/s ≥ 80% of the dense trunk's saturation at 8B (≈ 50% MFU)", loglik_share("8b", "saturation"), lambda s: s >= 0.8),
    Target("whole PROST (released-gpt, 18,736 questions) at 8B ≤ 40 s of scoring", whole_prost, lambda s: s <= 40),
    Target("generation (NEWTON, CConS) ≥ 2× lm-eval at 1.1B", generate_ratio("1b"), lambda r: r >= 2),
    Target("generation (NEWTON, CConS) ≥ 2× lm-eval at 8B", generate_ratio("8b"), lambda r: r >= 2),
    Target("GPU busy ≥ 70% of physprobe's scoring phase at 1.1B", loglik_share("1b", "busy"), lambda s: s >= 0.7),
    Target("GPU busy ≥ 70% of physprobe's scoring phase at 8B", loglik_share("8b", "busy"), lambda s: s >= 0.7),
    Target("float32 on CUDA agrees with CPU float32 on ≥ 399 of 400 decisions", correctness, lambda share: share >= 399 / 400),
    Target("CPU: paper format ≥ 2.8× lm-eval on the 2-core machine",
           lambda card: (None, "a CPU figure: benchmarks/score_vs_lm_eval.py on the 2-core machine"), lambda r: r >= 2.8),
)  # fmt: skip


def targets(card: dict) -> list[dict]:
    """Every target's figure and status: met, not met, or not measured (and why)."""
    out = []
    for target in TARGETS:
        value, text = target.read(card)
        if value is None:
            out.append({"target": target.text, "figure": "-", "status": f"not measured ({text})"})
        else:
            out.append({"target": target.text, "figure": text, "status": "met" if target.met(value) else "not met"})
    return out


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _count(parameters: int | None) -> str:
    """Parameters in billions, or millions under 100M.

    >>> _count(6_979_321_856), _count(140_000)
    ('6.98B', '0.14M')
    """
    if parameters is None:
        return "-"
    return f"{parameters / 1e9:.2f}B" if parameters >= 1e8 else f"{parameters / 1e6:.2f}M"


def render(card: dict) -> str:
    """gpu_card.md: the card, its targets, each section's status and each workload's figures."""
    versions = ", ".join(f"{k} {v}" for k, v in card.get("versions", {}).items())
    lines = ["# physprobe GPU card", ""]
    if card.get("smoke"):
        lines += [
            "**Smoke run: tiny random shapes on the CPU. It exercises every section's code; its figures measure nothing.**",
            "",
        ]
    lines += [f"- device: {card.get('gpu') or card.get('device')} ({card.get('dtype')}); {versions}",
              f"- started {card.get('started')}; {_num(card.get('wall_s'))} s of a {_num(card.get('budget_s'))} s budget"
              + ("" if card.get("finished") else " — **the run did not finish; the sections below are those written**"),
              "- random weights; byte-level BPE tokenizers trained on the benchmarks' text; shapes: "
              + ", ".join(f"{k} = {v}" for k, v in card.get("shapes", {}).items()), ""]  # fmt: skip
    lines += ["## Targets (issue 41)", "", "| target | figure | status |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['figure']} | {t['status']} |" for t in targets(card)]
    lines += ["", "## Sections", "", "| section | status | seconds | budget (s) | error |", "|---|---|---|---|---|"]
    for s in card.get("sections", []):
        lines.append(
            f"| {s['name']} | {s['status']} | {_num(s.get('seconds'), 1)} | {_num(s.get('allowed_s'))} | {s.get('error') or ''} |"
        )
    for s in card.get("sections", []):
        section_md = RENDERERS.get(s["name"].split("-")[0])
        if s.get("figures") and section_md is not None:
            lines += ["", *section_md(s)]
    return "\n".join(lines) + "\n"


def _correctness_md(s: dict) -> list[str]:
    f = s["figures"]
    lines = [f"## Correctness: GPT-2-small shape, PROST released-gpt, {f.get('questions')} questions, float32, "
             f"{' vs '.join(f.get('devices', []))}", ""]  # fmt: skip
    for tag, run in f.get("runs", {}).items():
        lines.append(
            f"- `physprobe score --device {run['device']} --dtype float32`: {run['status']}, {_num(run.get('wall_s'), 1)} s"
        )
    if "agree" in f:
        lines.append(f"- decisions agreeing: **{f['agree']}/{f['compared']}**; max |Δ score| {f['max_abs_delta']:.2e}")
    return lines


def _loglik_md(s: dict) -> list[str]:
    f = s["figures"]
    summary = loglik_summary(f)
    matrix = f.get("matrix_flops")
    lines = [f"## Log-likelihood at {SIZES.get(f.get('size'), f.get('size'))}: PROST paper format (sentence-sum), "
             f"{f.get('questions')} questions, the exported lm-eval task", "",
             f"{f.get('shape')}; {_count(f.get('non_embedding'))} non-embedding parameters; bf16 matrix products "
             f"{_num((matrix or 0) / 1e12, 1)} TFLOP/s; dense trunk (saturation) {_num(summary['trunk_tokens_s'])} tokens/s; "
             f"{_plural(summary['rounds'], 'round')}, tools back to back, min/median/max", "",
             "| tool | seconds | tokens fed | tokens/s | MFU | % of saturation | lm-eval s / tool s | GPU busy | peak GiB |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for tool in TOOLS:
        t = summary.get(tool)
        if t:
            lines.append(f"| {tool} | {spread(t['seconds'])} | {t['tokens']:,} | {_num(t['tokens_s'])} | {_pct(t['mfu'])} | "
                         f"{_pct(t['saturation'])} | {spread(t['vs_lm_eval'])} | {_pct(t['busy'])} | {_num(t['peak_gib'], 1)} |")  # fmt: skip
    agreement = [a for a in summary["agreement"] if a is not None]
    if agreement:
        lines += ["", f"Identical decisions, physprobe / lm-eval: {100 * min(agreement):.1f}% (the lowest over the rounds)"]
    return lines


def _generate_md(s: dict) -> list[str]:
    f = s["figures"]
    lines = [f"## Generation at {SIZES.get(f.get('size'), f.get('size'))}: NEWTON released-generate, CConS question-generate, "
             f"the first {_plural(f.get('rows_per_config'), 'row')} of each config; lm-eval generate_until on the exported tasks", "",
             f"{f.get('shape')}; dense trunk {_num(f.get('trunk_tokens_s'))} tokens/s; min/median/max over the rounds", "",
             "| benchmark | tool | seconds | lm-eval s / tool s | tokens fed | MFU | GPU busy | peak GiB | identical texts |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for benchmark, b in generate_summary(f).items():
        for tool in TOOLS:
            t = b[tool]
            lines.append(f"| {benchmark} | {tool} | {spread(t['seconds'])} | {spread(t['vs_lm_eval'])} | {t['tokens']:,} | {_pct(t['mfu'])} | "
                         f"{_pct(t['busy'])} | {_num(t['peak_gib'], 1)} | {b['identical']}/{b['rows']} |")  # fmt: skip
    return lines


def _card_md(s: dict) -> list[str]:
    f = s["figures"]
    lines = [f"## The whole card at 8B: `physprobe score`, every benchmark's default protocol ({f.get('model')})", "",
             f"Model saved in {_num(f.get('save_s'), 1)} s; whole PROST, then the whole card in one `--benchmark all` command, "
             "limited (every row of every benchmark does not fit the card's 9 minutes).", "",
             "| command | status | rows scored | model load s | scoring s | wall s |", "|---|---|---|---|---|---|"]  # fmt: skip
    total = 0.0
    for c in f.get("commands", []):
        name = f"{','.join(c['benchmarks'])} " + ("(whole)" if c["limit"] is None else f"(--limit {c['limit']})")
        runs = c.get("runs", [])
        scoring = sum(r["scoring_s"] for r in runs) if runs else None
        total += c.get("wall_s") or 0
        lines.append(f"| {name} | {c['status']}{': ' + c['error'] if c.get('error') else ''} | {sum(r['rows'] for r in runs) if runs else '-'} | "
                     f"{_num(sum(r['load_s'] for r in runs), 1) if runs else '-'} | {_num(scoring, 1)} | {_num(c.get('wall_s'), 1)} |")  # fmt: skip
    lines += ["", f"Total wall seconds of the commands: {total:.1f}"]
    return lines


def _host_md(s: dict) -> list[str]:
    f = s["figures"]
    run = f.get("command") or {}
    runs = f.get("runs") or []
    busy = _pct(f.get("busy")) if f.get("busy") is not None else f"- ({f.get('busy_error') or 'not sampled'})"
    return [f"## The host's share at 1.1B: `physprobe score` of whole PROST ({f.get('model')})", "",
            f"Model saved in {_num(f.get('save_s'), 1)} s; the GPU's busy share sampled from NVML every 0.25 s over the whole command "
            f"({_num(f.get('samples'))} samples).", "",
            "| command | status | rows scored | model load s | scoring s | wall s | GPU busy |", "|---|---|---|---|---|---|---|",
            f"| prost (whole) | {run.get('status', '-')}{': ' + run['error'] if run.get('error') else ''} | "
            f"{sum(r['rows'] for r in runs) if runs else '-'} | {_num(sum(r['load_s'] for r in runs), 1) if runs else '-'} | "
            f"{_num(sum(r['scoring_s'] for r in runs), 1) if runs else '-'} | {_num(run.get('wall_s'), 1)} | {busy} |"]  # fmt: skip


RENDERERS = {
    "correctness": _correctness_md,
    "host": _host_md,
    "loglik": _loglik_md,
    "generate": _generate_md,
    "card": _card_md,
}  # by name before "-"

if __name__ == "__main__":
    print(render(json.loads(Path(sys.argv[1]).read_text())), end="")
