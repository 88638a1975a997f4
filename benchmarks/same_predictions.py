"""Predictions before and after: every protocol of every benchmark, for every model family it serves, scored by this
checkout and by commit ``--old`` (default 4673c87, before issue 47) from a git worktree of it (``earlier.py``), with
the tiny models of ``tests/tiny_models.py``; predictions.parquet compared column by column (predictions, scores,
generated texts, prompts and their token counts).

    python benchmarks/same_predictions.py --data data --work /tmp/same-predictions [--limit 6]

Models, made once under ``--work``: ``tiny-causal`` (GPT-2, one layer; a name not starting with ``gpt``, so PROST's
``released-gpt`` encodes the text whole and splices the option in), ``gpt2-tiny`` (the same weights under a ``gpt``
name: the segments framed by BOS and EOS), ``tiny-chat`` (the same with a chat template, every protocol scored with
``--apply-chat-template``), ``tiny-bert`` (masked LM), ``tiny-t5`` (seq2seq), ``tiny-nli``. Each side runs all its
commands in one process (``physprobe.cli.main``), ``--limit`` rows per config, ``--bootstrap-iters 0``. A command
that fails must fail on both sides with the same exit status. Printed: one line per command that differs, then
the count of identical runs; the exit status is 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import earlier  # a sibling script
import pyarrow.parquet as pq
from host_speed import OLD, differing_columns

from physprobe.data import registry

CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<s>assistant:{% endif %}")  # fmt: skip
# Each side runs its commands in one process: argv lists in, exit statuses out (a SystemExit is its code).
RUNNER = """
import contextlib, io, json, sys
from physprobe.cli import main
codes = []
for argv in json.load(open(sys.argv[1])):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            codes.append(main(argv))
        except SystemExit as stop:
            codes.append(stop.code)
json.dump(codes, open(sys.argv[2], "w"))
"""


def tiny_models(work: Path, data: Path) -> dict[str, Path]:
    """The tiny model of each kind (made once under ``work``): name -> folder."""
    sys.path.insert(0, str(earlier.REPO))
    from transformers import AutoTokenizer

    from tests import tiny_models as make

    folders = {name: work / name for name in ("tiny-causal", "gpt2-tiny", "tiny-chat", "tiny-bert", "tiny-t5", "tiny-nli")}
    if all((folder / "config.json").is_file() for folder in folders.values()):
        return folders
    texts = make.benchmark_texts(data)
    make.causal_lm(folders["tiny-causal"], texts, layers=1)
    for name in ("gpt2-tiny", "tiny-chat"):
        shutil.copytree(folders["tiny-causal"], folders[name], dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(folders["tiny-chat"])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folders["tiny-chat"])
    make.masked_lm(folders["tiny-bert"], texts)
    make.seq2seq(folders["tiny-t5"], texts)
    make.nli(folders["tiny-nli"], texts)
    return folders


def commands(models: dict[str, Path], data: Path, limit: int) -> list[tuple[str, list[str]]]:
    """(label, ``physprobe score`` argv without ``--out``) for every benchmark, protocol and family it serves."""
    by_family = {"causal": ["tiny-causal", "gpt2-tiny", "tiny-chat"], "mlm": ["tiny-bert"], "seq2seq": ["tiny-t5"],
                 "nli": ["tiny-nli"]}  # fmt: skip
    found = []
    for benchmark in registry.names():
        for protocol in registry.evaluation(benchmark).protocols:
            for family in protocol.families:
                for model in by_family[family]:
                    argv = ["score", "--model", str(models[model]), "--benchmark", benchmark, "--protocol", protocol.name,
                            "--data", str(data), "--device", "cpu", "--limit", str(limit), "--bootstrap-iters", "0",
                            *(["--apply-chat-template"] if model == "tiny-chat" else [])]  # fmt: skip
                    found.append((f"{benchmark} {protocol.name} {family} {model}", argv))
    return found


def run_side(tree: Path | None, planned: list[tuple[str, list[str]]], out: Path, cwd: Path) -> list:
    """Every planned command by ``tree``'s code (None: this checkout's) in one process, each into ``out/<index>``."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    argvs = [[*argv, "--out", str(out / str(index))] for index, (_, argv) in enumerate(planned)]
    (out / "commands.json").write_text(json.dumps(argvs))
    subprocess.run([sys.executable, "-c", RUNNER, str(out / "commands.json"), str(out / "codes.json")],
                   env=earlier.environment(tree), cwd=cwd, check=True)  # fmt: skip
    return json.loads((out / "codes.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data"), help="the built benchmarks (physprobe build all)")
    parser.add_argument("--work", type=Path, required=True, help="folder for the old worktree, the models and the runs")
    parser.add_argument("--old", default=OLD, help=f"the commit to compare with (default {OLD})")
    parser.add_argument("--limit", type=int, default=6, help="rows per config (default 6)")
    args = parser.parse_args()
    data, work = args.data.resolve(), args.work.resolve()
    missing = [b for b in registry.names() if not (data / b / "README.md").is_file()]
    if missing:
        parser.error(f"--data {data}: no built {', '.join(missing)}; run `physprobe build all --out {data}` first")
    tree = earlier.worktree(args.old, work)
    planned = commands(tiny_models(work, data), data, args.limit)
    runs = work / "runs"
    codes = {name: run_side(side, planned, runs / name, work) for name, side in (("old", tree), ("new", None))}
    same, differ, scored, added = 0, [], 0, set()
    for index, (label, _) in enumerate(planned):
        old, new = codes["old"][index], codes["new"][index]
        if old != new:
            differ.append(f"{label}: exit {old} before, {new} now")
            continue
        if old != 0:
            same += 1  # refused alike (a protocol this model cannot take)
            continue
        scored += 1
        folders = [sorted(p.parent for p in (runs / side / str(index)).rglob("predictions.parquet")) for side in codes]
        compared = [differing_columns(a, b) for a, b in zip(*folders)]
        columns = [c for differing, _ in compared for c in differing] if len(folders[0]) == len(folders[1]) else ["(runs)"]
        added.update(c for _, extra in compared for c in extra)
        if columns:
            differ.append(f"{label}: predictions.parquet differs in {', '.join(sorted(set(columns)))}")
        else:
            same += 1
    rows = sum(pq.read_metadata(p).num_rows for p in (runs / "new").rglob("predictions.parquet"))
    print("\n".join(differ))
    print(f"{same} of {len(planned)} commands alike before and after ({scored} scored, {rows:,} rows; "
          f"{len(planned) - scored - len(differ)} refused alike), {len(differ)} differ")  # fmt: skip
    if added:
        print(f"compared on the columns both write; only the new side writes {', '.join(sorted(added))}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
