"""physprobe's causal scoring against its token-minimal limit and EleutherAI lm-evaluation-harness, side by side.

    python benchmarks/score_vs_lm_eval.py --data build --limit 200 --runs 3
    python benchmarks/score_vs_lm_eval.py --device cuda --dtype bfloat16 --model-size 1b --lm-eval-batch-size auto

The model is randomly initialised (weights do not change throughput), built from a config and saved to disk:
``small`` is GPT-2-small's shape (124M, its 50,257-row vocabulary), ``1b`` a Llama-architecture model of
TinyLlama-1.1B's shape; the tokenizer is a byte-level BPE trained on PROST text. Formats, all on the same PROST
questions (evenly spread):

- ``paper``: the PROST paper's causal format, the whole sentence with each option in place of [MASK], scored as
  the sum of its log-probabilities (protocol ``sentence-sum``, ``scoring.sequence_logprobs``); as an lm-eval task,
  context = the text before [MASK], each choice = option + the rest of the sentence;
- ``lm-eval prompt``: lm-eval's own prost task, "{context}\\nQuestion: {ex_question}\\nAnswer:" with the four
  option words as the choices (``doc_to_choice: "{{[A, B, C, D]}}"``), joined with a space;
- ``released-gpt``: PROST's released GPT code, the mean token log-probability of [BOS] + sentence + EOS, the
  token ids built by the protocol itself (``released_gpt``, resolved by the hf backend's ``mean_token_ids``; this tokenizer has no BOS) and scored by
  ``scoring.mean_token_logprobs``, each question's shared prefix run once; no lm-eval counterpart.

The token-minimal limit is computed in the same run from measured unit costs: the trunk's seconds per token
(the model without its vocabulary head on dense, unpadded rows) and the head's seconds per row (vocabulary
projection + log-softmax), times the tokens and scored rows that the format needs at the least: each question's
shared prefix once and every option's own tokens; one head row per scored token, the prefix's last row serving
every option's first token (for ``released-gpt``, whose mean counts the prefix's tokens after the first too, one
head row per prefix token as well, so head rows = tokens). "tokens fed" counts the ids given to the model, padding included. Every tool
runs in the same process, interleaved run by run (min / median / max over ``--runs``); lm-eval's rows need
``pip install "lm-eval[hf]==0.4.13"`` (skipped when it is not importable).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import datasets
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers import PreTrainedTokenizerFast

from physprobe.backends.hf import batching, mean_token_ids, scoring
from physprobe.dataset_scripts.prost.evaluation import released_gpt


def make_model(folder: Path, texts: list[str], size: str) -> Path:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    # No BOS token, as GPT-2's: neither tool prepends one, so both condition on the same tokens.
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(0)
    special = {"bos_token_id": fast.eos_token_id, "eos_token_id": fast.eos_token_id}
    if size == "small":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=50257, **special))
    else:  # TinyLlama-1.1B's shape
        model = LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                             num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                                             **special))  # fmt: skip
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def formats(rows: list[dict], tokenizer) -> dict[str, list]:
    """(context, continuations) per question, both tools joining them with a space; for ``released-gpt`` the
    option token ids that PROST's ``released-gpt`` protocol asks (``released_gpt``, resolved by ``mean_token_ids``)."""
    prompt = [(f"{r['context']}\nQuestion: {r['ex_question']}\nAnswer:", [r[k] for k in "ABCD"]) for r in rows]
    paper = []
    for r in rows:
        before, after = f"{r['context']} {r['question']}".split("[MASK]")
        paper.append((before.rstrip(), [f"{r[k]}{after}" for k in "ABCD"]))
    return {"paper": paper, "lm-eval prompt": prompt, "released-gpt": [mean_token_ids(released_gpt(r, "default"), tokenizer) for r in rows]}


def write_task(folder: Path, name: str, questions: list[tuple[str, list[str]]], labels: list[int]) -> None:
    data = folder / f"{name}.jsonl"
    with open(data, "w") as handle:
        for (context, choices), label in zip(questions, labels):
            handle.write(json.dumps({"context": context, "choices": choices, "label": label}) + "\n")
    (folder / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        "output_type: multiple_choice\ntest_split: test\ndoc_to_text: \"{{context}}\"\n"
        "doc_to_target: label\ndoc_to_choice: \"{{choices}}\"\nmetric_list:\n  - metric: acc\n"
    )


class FedTokens:
    """Counts the token ids given to a model's forward (padding included)."""

    def __init__(self, model):
        self.count = 0
        model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.count += ids.numel() if ids is not None else 0


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_lm_eval(model_dir: Path, task_dir: Path, name: str, device: str, dtype: str, batch_size: str):
    """lm-eval's predictions, scoring seconds (its ``loglikelihood``) and tokens fed to the model."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=str(model_dir), device=device, batch_size=batch_size, dtype=dtype)
    fed = FedTokens(lm.model)
    seconds = [0.0]
    original = lm.loglikelihood

    def timed(requests, *args, **kwargs):
        start = time.perf_counter()
        out = original(requests, *args, **kwargs)
        synchronize(device)
        seconds[0] += time.perf_counter() - start
        return out

    lm.loglikelihood = timed
    results = lm_eval.simple_evaluate(model=lm, tasks=[name], task_manager=TaskManager(include_path=str(task_dir)),
                                      log_samples=True, verbosity="ERROR")  # fmt: skip
    samples = sorted(results["samples"][name], key=lambda s: s["doc_id"])
    predictions = [max(range(len(s["filtered_resps"])), key=lambda i: s["filtered_resps"][i][0]) for s in samples]
    return predictions, seconds[0], fed.count


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
    parser.add_argument("--data", default="build", help="folder holding the built prost benchmark")
    parser.add_argument("--limit", type=int, default=200, help="questions (evenly spread over PROST)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--model-size", default="small", choices=["small", "1b"])
    parser.add_argument("--lm-eval-batch-size", default="32", help="lm-eval's --batch_size (a number or auto)")
    parser.add_argument("--formats", default="paper,lm-eval prompt,released-gpt")
    args = parser.parse_args()
    try:
        import lm_eval  # noqa: F401

        have_lm_eval = True
    except ImportError:
        have_lm_eval = False
    datasets.disable_progress_bars()
    prost = datasets.load_dataset(str(Path(args.data) / "prost"), "default", split="test")
    rows = [prost[i * len(prost) // args.limit] for i in range(args.limit)]
    labels = [r["label"] for r in rows]
    chosen = [f.strip() for f in args.formats.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        texts = [f"{r['context']} {r['question']} {r['ex_question']}" for r in prost]
        model_dir = make_model(tmp / "model", texts, args.model_size)
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa", dtype=getattr(torch, args.dtype))
        model = model.eval().to(args.device)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        fed = FedTokens(model)
        every = formats(rows, tokenizer)
        for index, fmt in enumerate(chosen):
            if fmt != "released-gpt":
                write_task(tmp, f"bench_{index}", every[fmt], labels)
        table = {fmt: {"physprobe": [], "limit": [], "lm-eval": []} for fmt in chosen}
        counts: dict = {}
        agreement: dict = {}
        for run in range(args.runs):
            for index, fmt in enumerate(chosen):
                questions = every[fmt]
                if have_lm_eval and fmt != "released-gpt":
                    theirs, seconds, their_tokens = run_lm_eval(model_dir, tmp, f"bench_{index}", args.device, args.dtype,
                                                                args.lm_eval_batch_size)  # fmt: skip
                    table[fmt]["lm-eval"].append(seconds)
                    counts[(fmt, "lm-eval")] = their_tokens
                fed.count = 0
                start = time.perf_counter()
                scores = physprobe_scores(model, tokenizer, fmt, questions, args.device)
                synchronize(args.device)
                table[fmt]["physprobe"].append(time.perf_counter() - start)
                counts[(fmt, "physprobe")] = fed.count
                ours = [max(range(len(s)), key=lambda i: s[i]) for s in scores]
                if have_lm_eval and fmt != "released-gpt":
                    agreement[fmt] = sum(a == b for a, b in zip(ours, theirs)) / len(ours)
                per_token, per_row = unit_costs(model, args.device)
                tokens, head_rows = minimal_work(tokenizer, fmt, questions)
                table[fmt]["limit"].append(per_token * tokens + per_row * head_rows)
                counts[(fmt, "limit")] = tokens
            done = {fmt: {tool: round(times[-1], 2) for tool, times in tools.items() if times} for fmt, tools in table.items()}
            print(f"run {run + 1}/{args.runs} seconds: {done}", flush=True)
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
    if not have_lm_eval:
        print("lm-eval is not importable here: its rows are left out (pip install 'lm-eval[hf]==0.4.13')")


if __name__ == "__main__":
    main()
