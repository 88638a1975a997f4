"""physprobe's scorer against EleutherAI lm-evaluation-harness on the same local causal model and PROST questions.

    python benchmarks/score_vs_lm_eval.py --data build --limit 400 [--device cpu|cuda] [--batch-size 32]

Needs ``pip install "lm-eval[hf]==0.4.13"`` (in its own environment if you like) and a built PROST
(``physprobe build prost --out build``). The model is a random-initialised GPT-2-small architecture with
a byte-level BPE tokenizer trained on PROST text, saved to disk and loaded from its path by both tools.
Two comparisons, each run one after the other in this process:

1. lm-eval's own prost prompt ("{context}\\nQuestion: {ex_question}\\nAnswer:" + " A/B/C/D" option),
2. the PROST paper's causal format (the whole sentence with each option in place of [MASK]) as an lm-eval
   task: context = the text before [MASK], each choice = option + the rest of the sentence.

Printed: wall time of the whole run and of the scoring phase for both tools and their ratio, tokens per
second, the share of identical predictions, and physprobe's throughput as a fraction of a bare forward
loop over the same tensors.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import datasets
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from physprobe import scoring


def make_model(folder: Path, texts: list[str]) -> Path:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(0)
    # GPT-2-small's own shape, vocabulary size included (50,257 rows; the trained tokenizer uses the first 8,000).
    GPT2LMHeadModel(GPT2Config(vocab_size=50257, bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id)).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def formats(rows: list[dict]) -> dict[str, list[tuple[str, list[str]]]]:
    """(context, continuations) per question for the two comparisons; lm-eval joins them with a space."""
    lm_eval_prompt = [(f"{r['context']}\nQuestion: {r['ex_question']}\nAnswer:", [r[k] for k in "ABCD"]) for r in rows]
    paper = []
    for r in rows:
        before, after = f"{r['context']} {r['question']}".split("[MASK]")
        paper.append((before.rstrip(), [f"{r[k]}{after}" for k in "ABCD"]))
    return {"lm-eval prost prompt": lm_eval_prompt, "PROST paper causal format": paper}


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


def run_lm_eval(model_dir: Path, task_dir: Path, name: str, device: str, batch_size: int):
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    start = time.perf_counter()
    lm = HFLM(pretrained=str(model_dir), device=device, batch_size=batch_size)
    scoring_time = [0.0]
    original = lm.loglikelihood

    def timed(requests, *args, **kwargs):
        t = time.perf_counter()
        out = original(requests, *args, **kwargs)
        scoring_time[0] += time.perf_counter() - t
        return out

    lm.loglikelihood = timed
    results = lm_eval.simple_evaluate(model=lm, tasks=[name], task_manager=TaskManager(include_path=str(task_dir)),
                                      log_samples=True, verbosity="ERROR")  # fmt: skip
    samples = sorted(results["samples"][name], key=lambda s: s["doc_id"])
    predictions = [max(range(len(s["filtered_resps"])), key=lambda i: s["filtered_resps"][i][0]) for s in samples]
    return predictions, time.perf_counter() - start, scoring_time[0]


def run_physprobe(model_dir: Path, questions, device: str):
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").eval().to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = [[f"{context} {c}" for c in choices] for context, choices in questions]
    t = time.perf_counter()
    scores = scoring.sequence_logprobs(model, tokenizer, texts, torch.device(device))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    scoring_seconds = time.perf_counter() - t
    predictions = [max(range(len(s)), key=lambda i: s[i]) for s in scores]
    return predictions, time.perf_counter() - start, scoring_seconds, model, tokenizer, texts


def bare_loop(model, tokenizer, texts, device: str) -> float:
    """The same forward passes as physprobe (each prefix once, then option k of every question on the shared
    cache, cropped back after each), on pre-built tensors, with no tokenization, log-softmax or bookkeeping."""
    groups = [scoring.tokenize_options(tokenizer, t) for t in texts]
    pad = tokenizer.pad_token_id
    prepared = []
    for batch_index in scoring.batched([max(len(s) for s in g) * len(g) for g in groups], 8192, 64):
        batch = [groups[i] for i in batch_index]
        lengths = [scoring.common_prefix(g) for g in batch]
        width = max(lengths)
        ids = torch.full((len(batch), width), pad)
        mask = torch.zeros_like(ids)
        for row, (g, n) in enumerate(zip(batch, lengths)):
            ids[row, width - n :] = torch.tensor(g[0][:n])
            mask[row, width - n :] = 1
        passes = []
        for k in range(len(batch[0])):
            tails = [g[k][n:][:-1] for g, n in zip(batch, lengths)]
            if not any(tails):
                continue
            t_ids = torch.full((len(batch), max(len(t) for t in tails)), pad)
            t_mask = torch.zeros_like(t_ids)
            for row, t in enumerate(tails):
                if t:
                    t_ids[row, : len(t)] = torch.tensor(t)
                    t_mask[row, : len(t)] = 1
            passes.append((t_ids.to(device), t_mask.to(device)))
        prepared.append((ids.to(device), mask.to(device), width, passes))
    start = time.perf_counter()
    with torch.inference_mode():
        for ids, mask, width, passes in prepared:
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            for t_ids, t_mask in passes:
                model(input_ids=t_ids, attention_mask=torch.cat([mask, t_mask], dim=1),
                      position_ids=positions[:, -1:] + t_mask.cumsum(-1), past_key_values=cache)  # fmt: skip
                cache.crop(-(cache.get_seq_length() - width))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="build", help="folder holding the built prost benchmark")
    parser.add_argument("--limit", type=int, default=400, help="questions (evenly spread over PROST)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=32, help="lm-eval's batch size")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    prost = datasets.load_dataset(str(Path(args.data) / "prost"), "default", split="test")
    rows = prost.select(range(0, len(prost), max(1, len(prost) // args.limit))).select(range(args.limit)).to_list()
    labels = [r["label"] for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = make_model(tmp / "gpt2-small-random", [f"{r['context']} {r['question']} {r['ex_question']}" for r in prost])
        print(f"model: random GPT-2-small architecture, {sum(p.numel() for p in GPT2LMHeadModel.from_pretrained(model_dir).parameters()) / 1e6:.0f}M parameters; "
              f"{len(rows)} PROST questions; device {args.device}")  # fmt: skip
        for index, (title, questions) in enumerate(formats(rows).items()):
            name = f"physprobe_bench_{index}"
            write_task(tmp, name, questions, labels)
            theirs, their_total, their_scoring = run_lm_eval(model_dir, tmp, name, args.device, args.batch_size)
            ours, our_total, our_scoring, model, tokenizer, texts = run_physprobe(model_dir, questions, args.device)
            # Warm comparison with a bare loop: both run again, after the first (cold) timed run.
            t = time.perf_counter()
            scoring.sequence_logprobs(model, tokenizer, texts, torch.device(args.device))
            warm = time.perf_counter() - t
            bare = bare_loop(model, tokenizer, texts, args.device)
            tokens = sum(len(s) for t in texts for s in scoring.tokenize_options(tokenizer, t))
            same = sum(a == b for a, b in zip(theirs, ours)) / len(ours)
            print(f"\n== {title}")
            print(f"whole run:     lm-eval {their_total:7.1f} s   physprobe {our_total:7.1f} s   ratio {their_total / our_total:5.2f}x")
            print(f"scoring phase: lm-eval {their_scoring:7.1f} s   physprobe {our_scoring:7.1f} s   ratio {their_scoring / our_scoring:5.2f}x")
            print(f"tokens/s (all option tokens): lm-eval {tokens / their_scoring:,.0f}   physprobe {tokens / our_scoring:,.0f}")
            print(f"identical predictions: {100 * same:.1f}%")
            print(f"physprobe vs a bare forward loop over the same tensors (both warm): {bare / warm:.2f} of its throughput")


if __name__ == "__main__":
    main()
