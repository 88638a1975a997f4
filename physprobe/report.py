"""``physprobe report``: paper-style tables across runs, and PNG plots of accuracy per group and position."""

from __future__ import annotations

import json
from pathlib import Path

from physprobe.errors import PhysprobeError


def _load(run: Path) -> tuple[dict, dict]:
    try:
        return json.loads((run / "run.json").read_text()), json.loads((run / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PhysprobeError(f"{run} is not a finished physprobe run: {error}") from None


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _rows(info: dict, metrics: dict) -> tuple[list[str], list[str]]:
    """Column names and values of one run, in the paper's layout for its benchmark."""
    benchmark = info["benchmark"]
    if benchmark == "prost":
        m = metrics["default"]
        groups = sorted(m.get("by_group", {}))
        return groups + ["macro"], [_pct(m["by_group"][g]["accuracy"]) for g in groups] + [_pct(m.get("macro_accuracy"))]
    if benchmark == "cccons":
        names = [c for c in metrics]
        cells = [_pct(metrics[c].get("accuracy")) for c in names]
        for subset in ("ordinary", "ccommon"):
            for level in ("easy", "hard"):
                names.append(f"{subset} {level}")
                cells.append(_pct(metrics.get(subset, {}).get("by_difficulty", {}).get(level, {}).get("accuracy")))
        return names, cells
    if benchmark == "newton":
        names, cells = [], []
        for config, m in metrics.items():
            names.append(config)
            cells.append(_pct(m.get("agreement_accuracy", m.get("accuracy"))))
        return names, cells
    m = metrics["default"]
    return ["strict acc", "pairwise acc", "mAP"], [_pct(m["strict"]["accuracy"]), _pct(m["pairwise"]["accuracy"]), _pct(m["strict"]["map"])]


def render(runs: list[Path], out: Path) -> Path:
    """Write ``out`` (Markdown) with one table per benchmark, and PNG plots beside it."""
    loaded = [(run, *_load(run)) for run in runs]
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# physprobe report", ""]
    for benchmark in sorted({info["benchmark"] for _, info, _ in loaded}):
        lines += [f"## {benchmark}", ""]
        header = None
        for run, info, metrics in (x for x in loaded if x[1]["benchmark"] == benchmark):
            names, cells = _rows(info, metrics)
            if header is None:
                header = names
                lines += ["| model | method | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
            model = Path(info["model"]).name + (f" ({info['gguf_file']})" if info.get("gguf_file") else "")
            lines.append(f"| {model} | {info['method']} | " + " | ".join(cells) + " |")
            plot = _plot(run, info, metrics, out.parent)
            if plot:
                lines.append("")
                lines.append(f"![{benchmark} {model}]({plot.name})")
        lines.append("")
    out.write_text("\n".join(lines))
    return out


def _plot(run: Path, info: dict, metrics: dict, folder: Path) -> Path | None:
    """Bar charts of accuracy per group (and per answer position for PROST)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for config, m in metrics.items():
        if isinstance(m, dict) and "by_group" in m:
            panels.append((f"{config}: accuracy per group", {k: v["accuracy"] for k, v in m["by_group"].items()}))
        if isinstance(m, dict) and "by_position" in m:
            panels.append((f"{config}: accuracy per answer position", {str(k): v["accuracy"] for k, v in m["by_position"].items()}))
    if not panels:
        return None
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for axis, (title, values) in zip(axes[0], panels):
        axis.bar(list(values), list(values.values()), color="#4c72b0")
        axis.set_title(title, fontsize=9)
        axis.set_ylim(0, 1)
        axis.tick_params(axis="x", labelrotation=60, labelsize=7)
    figure.suptitle(f"{info['benchmark']} — {Path(info['model']).name} ({info['method']})", fontsize=10)
    figure.tight_layout()
    path = folder / f"{info['benchmark']}-{run.name}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
