"""physprobe's causal scoring against the same model's limit and EleutherAI lm-evaluation-harness, side by side.

    python benchmarks/score_vs_lm_eval.py --data data --limit 200 --runs 3
    python benchmarks/score_vs_lm_eval.py --device cuda --dtype bfloat16 --model-size 1b --lm-eval-batch-size auto
    python benchmarks/score_vs_lm_eval.py --device cuda --dtype bfloat16 --model-size 8b --limit 18736 --lm-eval-batch-size auto

The model is randomly initialised (weights do not change throughput), built from a config on the device in the dtype
asked (no float32 copy first), and given to both tools as the same object: ``small`` is GPT-2-small's shape (124M,
its 50,257-row vocabulary), ``1b`` a Llama-architecture model of TinyLlama-1.1B's shape, ``8b`` one of Llama-3-8B's
(7.5B with its 128,256-row vocabulary); the tokenizer is a byte-level BPE trained on PROST text. Formats, all on the
same PROST questions (evenly spread):

- ``paper``: the PROST paper's causal format, the whole sentence with each option in place of [MASK], scored as
  the sum of its log-probabilities (protocol ``sentence-sum``, ``scoring.sequence_logprobs``); as an lm-eval task,
  context = the text before [MASK], each choice = option + the rest of the sentence;
- ``lm-eval prompt``: lm-eval's own prost task, "{context}\\nQuestion: {ex_question}\\nAnswer:" with the four
  option words as the choices (``doc_to_choice: "{{[A, B, C, D]}}"``), joined with a space;
- ``released-gpt``: PROST's released GPT code, the mean token log-probability of [BOS] + sentence + EOS, the
  token ids built by the protocol itself (``released_gpt``, resolved by ``physprobe.protocols.tokenized.mean_token_ids``; this tokenizer has no BOS) and scored by
  ``scoring.mean_token_logprobs``, each question's shared prefix run once; no lm-eval counterpart.

The limit, measured in the same run: on CPU the token-minimal limit, from the trunk's seconds per token (the model
without its vocabulary head on dense, unpadded rows) and the head's seconds per row (vocabulary projection +
log-softmax), times the tokens and scored rows that the format needs at the least: each question's shared prefix
once and every option's own tokens; one head row per scored token, the prefix's last row serving every option's first
token (for ``released-gpt``, whose mean counts the prefix's tokens after the first too, one head row per prefix token
as well, so head rows = tokens). On CUDA those tokens at the trunk's throughput on a large dense batch (32 rows of
1,024 tokens: its saturation, not small rows). "tokens fed" counts the ids given to the model, padding included.
On CUDA it also prints, per format and tool: the tokens fed per second against that trunk throughput; model FLOPs
utilisation (2 x non-embedding parameters x tokens fed, plus attention, 4 x width x query tokens x the keys each sees
causally, over the card's bf16 matrix-product rate measured in the same run); the share of the scoring phase the GPU
is busy (the union of its kernels and copies in a torch.profiler trace of one more run); and peak memory. Every tool
runs in the same process, interleaved run by run (min / median / max over ``--runs``); lm-eval's rows need
``pip install "lm-eval[hf]==0.4.13"`` (skipped when it is not importable).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import datasets
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, LlamaConfig, PreTrainedTokenizerFast

from physprobe.backends.hf import batching, scoring
from physprobe.dataset_scripts.prost.evaluation import released_gpt
from physprobe.protocols.tokenized import mean_token_ids

# Random shapes: GPT-2-small, TinyLlama-1.1B, Llama-3-8B (its vocabulary, grouped-query attention and rope base).
SHAPES = {
    "small": lambda special: GPT2Config(vocab_size=50257, **special),
    "1b": lambda special: LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                      num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048, **special),
    "8b": lambda special: LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                                      rope_theta=500000.0, **special),
}  # fmt: skip


def train_tokenizer(folder: Path, texts: list[str]):
    """A byte-level BPE of 8,000 tokens trained on ``texts``, saved in ``folder`` (``<|endoftext|>`` its EOS and pad,
    no BOS, as GPT-2's: neither tool prepends one, so both condition on the same tokens), read back as transformers
    reads it."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def random_model(shape, tokenizer, device: str = "cpu", dtype: str = "float32"):
    """The random model of ``shape`` (a ``SHAPES`` value: special token ids -> config), seeded, built on ``device`` in
    ``dtype`` (its parameters created there, in that dtype: no float32 copy of an 8B model on the host), its BOS and
    EOS the tokenizer's EOS."""
    torch.manual_seed(0)
    config = shape({"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id})
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype), attn_implementation="sdpa")
    return model.eval()


def make_model(folder: Path, texts: list[str], size: str, device: str = "cpu", dtype: str = "float32"):
    """The random model of ``size`` (``random_model``) and the tokenizer trained on ``texts``, saved in ``folder``."""
    tokenizer = train_tokenizer(folder, texts)
    return random_model(SHAPES[size], tokenizer, device, dtype), tokenizer


def formats(rows: list[dict], tokenizer) -> dict[str, list]:
    """(context, continuations) per question, both tools joining them with a space; for ``released-gpt`` the
    option token ids that PROST's ``released-gpt`` protocol asks (``released_gpt``, resolved by ``mean_token_ids``)."""
    prompt = [(f"{r['context']}\nQuestion: {r['ex_question']}\nAnswer:", [r[k] for k in "ABCD"]) for r in rows]
    paper = []
    for r in rows:
        before, after = f"{r['context']} {r['question']}".split("[MASK]")
        paper.append((before.rstrip(), [f"{r[k]}{after}" for k in "ABCD"]))
    return {
        "paper": paper,
        "lm-eval prompt": prompt,
        "released-gpt": mean_token_ids([released_gpt(r, "default") for r in rows], tokenizer),
    }


def write_task(folder: Path, name: str, questions: list[tuple[str, list[str]]], labels: list[int]) -> None:
    data = folder / f"{name}.jsonl"
    with open(data, "w") as handle:
        for (context, choices), label in zip(questions, labels):
            handle.write(json.dumps({"context": context, "choices": choices, "label": label}) + "\n")
    (folder / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        'output_type: multiple_choice\ntest_split: test\ndoc_to_text: "{{context}}"\n'
        'doc_to_target: label\ndoc_to_choice: "{{choices}}"\nmetric_list:\n  - metric: acc\n'
    )


class FedTokens:
    """Counts the token ids given to a model's forward (padding included), and the attention FLOPs of those passes:
    4 x the attention width x, per query token, the keys it sees causally (its cache and the earlier tokens of its row)."""

    def __init__(self, model):
        self.count = self.attention_flops = 0
        config = model.config
        heads = getattr(config, "num_attention_heads", None) or config.n_head
        head_dim = getattr(config, "head_dim", None) or (getattr(config, "hidden_size", None) or config.n_embd) // heads
        self.per_key = 4 * heads * head_dim * (getattr(config, "num_hidden_layers", None) or config.n_layer)
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def remove(self) -> None:
        """Stop counting (the model is left as it was)."""
        self.handle.remove()

    def _hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5 names it cache in generate
        cached = cache.get_seq_length() if cache is not None else 0
        rows, width = ids.shape
        self.count += ids.numel()
        self.attention_flops += self.per_key * rows * width * (cached + (width + 1) / 2)

    def reset(self) -> None:
        self.count = self.attention_flops = 0


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matrix_rate(device: str, n: int = 8192, repeats: int = 20) -> float:
    """The card's bf16 matrix-product rate in FLOP/s, measured: ``n`` x ``n`` products back to back."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    a @ b  # warm-up
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def non_embedding_parameters(model) -> int:
    """Parameters less the input embeddings and an untied vocabulary head: the ones a fed token multiplies."""
    embeddings = {id(p) for module in (model.get_input_embeddings(), model.get_output_embeddings()) for p in module.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)


def trunk_rate(model, device: str, rows: int = 32, width: int = 1024, repeats: int = 3) -> float:
    """Tokens per second of the model without its vocabulary head on a large dense batch (no mask, no padding)."""
    ids = torch.randint(0, 1000, (rows, width), device=device)
    with torch.inference_mode():
        model.base_model(input_ids=ids)  # warm-up
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            model.base_model(input_ids=ids)
        synchronize(device)
    return repeats * rows * width / (time.perf_counter() - start)


def gpu_busy(run) -> float:
    """The share of ``run``'s wall time during which the GPU runs a kernel or a copy: the union of the CUDA activities
    of a torch.profiler trace over the wall time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    spans = sorted(
        (e.start_ns(), e.end_ns()) for e in trace.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA
    )
    busy, reach = 0, None
    for begin, end in spans:  # the union of the intervals
        if reach is None or begin > reach:
            busy += end - begin
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    return busy / 1e9 / wall


class BusySampler:
    """The GPU's busy share over the blocks run under it (``with sampler:``, accumulated until ``reset``), sampled: a
    thread reads NVML's utilisation (``torch.cuda.utilization``: the percent of its last sample period, 1/6 to 1 s,
    in which a kernel ran) every ``interval`` seconds. ``share`` is None off CUDA, before a sample, or where NVML
    cannot be read (``error`` says why). Unlike ``gpu_busy`` it needs no extra run: it samples the timed ones.

    >>> readings = iter([40, 60, 80, 100] * 100)
    >>> with BusySampler("cuda", interval=0.001, read=lambda: next(readings)) as sampler:
    ...     time.sleep(0.05)
    >>> 0.4 <= sampler.share <= 1.0 and len(sampler.samples) > 1
    True
    """

    def __init__(self, device: str, interval: float = 0.05, read=None):
        cuda = device.startswith("cuda")
        self.read = read or ((lambda: torch.cuda.utilization(torch.device(device))) if cuda else None)
        self.interval, self.samples, self.error = interval, [], None

    def reset(self) -> None:
        self.samples, self.error = [], None

    @property
    def share(self) -> float | None:
        return statistics.fmean(self.samples) / 100 if self.samples else None

    def __enter__(self):
        if self.read is not None and self.error is None:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while True:
            try:
                self.samples.append(float(self.read()))
            except Exception as error:  # no NVML (pynvml missing, a driver that refuses): no figure, and why
                self.error = f"{type(error).__name__}: {error}".splitlines()[0]
                return
            if self._stop.wait(self.interval):
                return

    def __exit__(self, *exc) -> None:
        if hasattr(self, "_thread"):
            self._stop.set()
            self._thread.join()
            del self._thread


class Phase:
    """A tool's scoring phase on CUDA: its seconds, tokens fed, attention FLOPs, peak memory, the GPU's busy share
    sampled during the timed run (``sampled_busy``, ``BusySampler``) and (when ``profiled``) that of a profiler trace."""

    def __init__(self, device: str, fed: FedTokens):
        self.device, self.fed = device, fed
        self.seconds = self.peak = self.busy = 0.0
        self.sampled_busy = None
        self.sampler = BusySampler(device)
        self.profiled = False

    def __call__(self, run):
        """Run ``run`` (a tool's scoring call) as one measured phase; return its result."""
        self.fed.reset()
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        out = []
        if self.profiled:
            self.busy = gpu_busy(lambda: out.append(run()))
        else:
            synchronize(self.device)
            self.sampler.reset()
            start = time.perf_counter()
            with self.sampler:
                out.append(run())
                synchronize(self.device)
            self.seconds = time.perf_counter() - start
            self.sampled_busy = self.sampler.share
        if self.device.startswith("cuda"):
            self.peak = torch.cuda.max_memory_allocated() / 2**30
        self.tokens, self.attention_flops = self.fed.count, self.fed.attention_flops
        return out[0]


def lm_eval_runner(model, tokenizer_dir: Path, task_dir: Path, device: str, batch_size: str, phase: Phase):
    """lm-eval's hf backend on the same model object, and a function running one task: its predictions (its
    ``loglikelihood`` measured as ``phase``)."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=model, tokenizer=str(tokenizer_dir), device=device, batch_size=batch_size)
    original = lm.loglikelihood
    lm.loglikelihood = lambda requests, *args, **kwargs: phase(lambda: original(requests, *args, **kwargs))

    def run(name: str) -> list[int]:
        manager = TaskManager(
            include_path=str(task_dir), include_defaults=False
        )  # the tasks written by then (13 s less: not lm-eval's own)
        results = lm_eval.simple_evaluate(model=lm, tasks=[name], task_manager=manager, log_samples=True, verbosity="ERROR")
        samples = sorted(results["samples"][name], key=lambda s: s["doc_id"])
        return [max(range(len(s["filtered_resps"])), key=lambda i: s["filtered_resps"][i][0]) for s in samples]

    return run


def token_ids(tokenizer, fmt: str, questions) -> list[list[list[int]]]:
    """The token ids of every option sequence, as the format scores them."""
    if fmt == "released-gpt":  # token ids already
        return questions
    return [scoring.tokenize_options(tokenizer, [f"{context} {c}" for c in choices]) for context, choices in questions]


def physprobe_scores(model, tokenizer, fmt: str, questions, device: str):
    if fmt == "released-gpt":
        return scoring.mean_token_logprobs(model, tokenizer, questions, torch.device(device))
    texts = [[f"{context} {c}" for c in choices] for context, choices in questions]
    return scoring.sequence_logprobs(model, tokenizer, texts, torch.device(device))


def minimal_work(tokenizer, fmt: str, questions) -> tuple[int, int]:
    """Tokens and head rows the format needs at the least: each question's shared prefix once and every
    option's own tokens; a head row per scored token (released-gpt scores the prefix's tokens after the
    first too: one row per fed token)."""
    tokens = rows = 0
    for ids in token_ids(tokenizer, fmt, questions):
        n = scoring.common_prefix(ids)
        own = sum(len(s) - n - 1 for s in ids)
        tokens += n + own
        rows += (n if fmt == "released-gpt" else 1) + own
    return tokens, rows


def unit_costs(model, device: str, width: int = 32, rows: int = 32, repeats: int = 4) -> tuple[float, float]:
    """Seconds per token of the trunk (dense causal rows of ``width`` tokens) and per row of the head
    (projection to the vocabulary + log-softmax)."""
    trunk, head = model.base_model, model.get_output_embeddings()
    ids = torch.randint(0, 1000, (rows, width), device=device)
    with torch.inference_mode():
        hidden = trunk(input_ids=ids).last_hidden_state  # warm-up
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            hidden = trunk(input_ids=ids).last_hidden_state
        synchronize(device)
        per_token = (time.perf_counter() - start) / (repeats * rows * width)
        flat = hidden.reshape(-1, hidden.shape[-1])
        targets = ids.reshape(-1)
        start = time.perf_counter()
        for _ in range(repeats):
            batching.token_logprobs(head(flat), targets)
        synchronize(device)
        per_row = (time.perf_counter() - start) / (repeats * flat.shape[0])
    return per_token, per_row


def spread(values: list[float], digits: int = 2) -> str:
    """min/median/max of repeated measurements, as every benchmark here prints them."""
    return "/".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", help="folder holding the built prost benchmark")
    parser.add_argument("--limit", type=int, default=200, help="questions (evenly spread over PROST)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--model-size", default="small", choices=list(SHAPES))
    parser.add_argument("--lm-eval-batch-size", default="32", help="lm-eval's --batch_size (a number or auto)")
    parser.add_argument("--formats", default="paper,lm-eval prompt,released-gpt")
    args = parser.parse_args()
    try:
        import lm_eval  # noqa: F401

        have_lm_eval = True
    except ImportError:
        have_lm_eval = False
    cuda = args.device.startswith("cuda")
    datasets.disable_progress_bars()
    prost = datasets.load_dataset(str(Path(args.data) / "prost"), "default", split="test")
    rows = [prost[i * len(prost) // args.limit] for i in range(args.limit)]
    labels = [r["label"] for r in rows]
    chosen = [f.strip() for f in args.formats.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        texts = [f"{r['context']} {r['question']} {r['ex_question']}" for r in prost]
        model, tokenizer = make_model(tmp / "model", texts, args.model_size, args.device, args.dtype)
        fed = FedTokens(model)
        phases = {tool: Phase(args.device, fed) for tool in ("physprobe", "lm-eval")}
        run_lm_eval = (
            lm_eval_runner(model, tmp / "model", tmp, args.device, args.lm_eval_batch_size, phases["lm-eval"])
            if have_lm_eval
            else None
        )
        every = formats(rows, tokenizer)
        for index, fmt in enumerate(chosen):
            if fmt != "released-gpt":
                write_task(tmp, f"bench_{index}", every[fmt], labels)
        table = {fmt: {"physprobe": [], "limit": [], "lm-eval": []} for fmt in chosen}
        counts: dict = {}
        agreement: dict = {}
        gpu: dict = {}  # (format, tool) -> tokens, attention FLOPs, peak GiB, busy share
        rates = {"matrix": [], "trunk": []}

        def measure(fmt: str, index: int) -> None:
            """One run of each tool on ``fmt`` (as its phases are set: timed, or profiled)."""
            questions = every[fmt]
            if run_lm_eval is not None and fmt != "released-gpt":
                theirs = run_lm_eval(f"bench_{index}")
            scores = phases["physprobe"](lambda: physprobe_scores(model, tokenizer, fmt, questions, args.device))
            ours = [max(range(len(s)), key=lambda i: s[i]) for s in scores]
            if run_lm_eval is not None and fmt != "released-gpt":
                agreement[fmt] = sum(a == b for a, b in zip(ours, theirs)) / len(ours)

        for run in range(args.runs):
            if cuda:
                rates["matrix"].append(matrix_rate(args.device))
                rates["trunk"].append(trunk_rate(model, args.device))
            for index, fmt in enumerate(chosen):
                measure(fmt, index)
                for tool in ("physprobe", "lm-eval"):
                    if tool == "physprobe" or (run_lm_eval is not None and fmt != "released-gpt"):
                        phase = phases[tool]
                        table[fmt][tool].append(phase.seconds)
                        counts[(fmt, tool)] = phase.tokens
                        gpu[(fmt, tool)] = {"attention": phase.attention_flops, "peak": phase.peak}
                tokens, head_rows = minimal_work(tokenizer, fmt, every[fmt])
                if cuda:
                    table[fmt]["limit"].append(tokens / rates["trunk"][-1])
                else:
                    per_token, per_row = unit_costs(model, args.device)
                    table[fmt]["limit"].append(per_token * tokens + per_row * head_rows)
                counts[(fmt, "limit")] = tokens
            done = {fmt: {tool: round(times[-1], 2) for tool, times in tools.items() if times} for fmt, tools in table.items()}
            print(f"run {run + 1}/{args.runs} seconds: {done}", flush=True)
        if cuda:  # one more run of each tool under the profiler: the GPU's busy share
            for phase in phases.values():
                phase.profiled = True
            for index, fmt in enumerate(chosen):
                measure(fmt, index)
                for tool in ("physprobe", "lm-eval"):
                    if (fmt, tool) in gpu:
                        gpu[(fmt, tool)]["busy"] = phases[tool].busy
    size = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"\n{size:.0f}M-parameter random {args.model_size} model, {args.dtype}, {args.device}; {args.limit} PROST questions; "
          f"{args.runs} runs, tools interleaved; scoring phase only (model loaded); min/median/max")  # fmt: skip
    header = f"{'format':<15} {'tool':<10} {'tokens fed':>10} {'tokens/s':>9} {'wall s':>17} {'/ limit':>16} {'/ lm-eval':>16}"
    print(header)
    for fmt in chosen:
        limit = table[fmt]["limit"]
        peer = table[fmt]["lm-eval"]
        for tool in ("physprobe", "lm-eval", "limit"):
            times = table[fmt][tool]
            if not times:
                continue
            tokens = counts[(fmt, tool)]
            to_limit = spread([t / l for t, l in zip(times, limit)])
            to_peer = spread([t / p for t, p in zip(times, peer)]) if peer else "-"
            print(f"{fmt:<15} {tool:<10} {tokens:>10,} {tokens / statistics.median(times):>9,.0f} {spread(times):>17} "
                  f"{to_limit:>16} {to_peer:>16}")  # fmt: skip
        if fmt in agreement:
            print(f"{fmt:<15} identical predictions physprobe / lm-eval: {100 * agreement[fmt]:.1f}%")
    if cuda:
        matrix, trunk = statistics.median(rates["matrix"]), statistics.median(rates["trunk"])
        weights = non_embedding_parameters(model)
        print(f"\ncard: bf16 matrix products {matrix / 1e12:,.0f} TFLOP/s (median of {args.runs}); dense trunk (32 x 1,024 tokens) "
              f"{trunk:,.0f} tokens/s = {100 * 2 * weights * trunk / matrix:.0f}% of it; {weights / 1e9:.2f}B non-embedding parameters")  # fmt: skip
        print(f"{'format':<15} {'tool':<10} {'tokens/s':>9} {'/ trunk':>8} {'MFU':>6} {'GPU busy':>9} {'peak GiB':>9}")
        for (fmt, tool), figures in gpu.items():
            seconds = statistics.median(table[fmt][tool])
            tokens = counts[(fmt, tool)]
            mfu = (2 * weights * tokens + figures["attention"]) / seconds / matrix
            print(f"{fmt:<15} {tool:<10} {tokens / seconds:>9,.0f} {100 * tokens / seconds / trunk:>7.0f}% {100 * mfu:>5.1f}% "
                  f"{100 * figures.get('busy', float('nan')):>8.0f}% {figures['peak']:>9.1f}")  # fmt: skip
    if not have_lm_eval:
        print("lm-eval is not importable here: its rows are left out (pip install 'lm-eval[hf]==0.4.13')")


if __name__ == "__main__":
    main()
