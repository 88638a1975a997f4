"""physprobe's continuous batch against transformers' own (``model.generate_batch``), greedy, on the same token ids.

    python benchmarks/generate_batch_check.py --data data --limit 24 --max-new-tokens 32

The prompts are NEWTON's ``released-generate`` Track 1 prompts (the first ``--limit`` rows), encoded as physprobe
encodes them, each answered up to ``--max-new-tokens`` tokens or EOS (no stop string: ``generate_batch`` takes none),
by SmolLM2-135M-Instruct in float32 on the CPU (as ``generate_vs_lm_eval.py`` loads it), with the same number of
answers per step at most for both (``--rows``: physprobe's slots, transformers' ``max_requests_per_batch``). Printed: each side's seconds (one run each, physprobe first, then transformers, then physprobe again) and
how many answers' token ids are identical.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import datasets
import torch
from generate_vs_lm_eval import make_model
from transformers import GenerationConfig
from transformers.generation import ContinuousBatchingConfig

from physprobe.backends.hf import continuous
from physprobe.data import registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data")
    parser.add_argument("--limit", type=int, default=24)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--rows", type=int, default=16)
    args = parser.parse_args()
    protocol = registry.evaluation("newton").protocol("released-generate")
    rows = datasets.load_dataset(str(Path(args.data) / "newton"), "track1", split="test").select(range(args.limit))
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = make_model(Path(tmp), "smollm2", [], "cpu", "float32")
    prompts = [tokenizer(protocol.build(row, "track1").prompt)["input_ids"] for row in rows]
    eos, budget = tokenizer.eos_token_id, args.max_new_tokens

    def ours() -> list[list[int]]:
        with torch.inference_mode():
            answers = continuous.decode(model, prompts, [budget] * len(prompts), lambda row, tokens: False, eos,
                                        torch.device("cpu"), args.rows)  # fmt: skip
        return [a if eos not in a else a[: a.index(eos)] for a in answers]

    def theirs() -> list[list[int]]:
        config = GenerationConfig(max_new_tokens=budget, do_sample=False, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
        batching = ContinuousBatchingConfig(max_requests_per_batch=args.rows)
        with torch.inference_mode():
            out = model.generate_batch(prompts, generation_config=config, continuous_batching_config=batching, warmup=False)
        answers = [out[key].generated_tokens for key in sorted(out, key=lambda k: int(k.split("_")[-1]))]
        return [a if eos not in a else a[: a.index(eos)] for a in answers]

    seconds = {}
    results = {}
    for name, run in (("physprobe", ours), ("transformers", theirs), ("physprobe again", ours)):
        start = time.perf_counter()
        results[name] = run()
        seconds[name] = time.perf_counter() - start
    same = sum(a == b for a, b in zip(results["physprobe"], results["transformers"]))
    print(f"{len(prompts)} prompts, up to {budget} tokens, {args.rows} rows a step")
    print(", ".join(f"{name} {s:.1f} s" for name, s in seconds.items()))
    print(f"identical answers (token ids up to EOS): {same}/{len(prompts)}; physprobe twice: "
          f"{sum(a == b for a, b in zip(results['physprobe'], results['physprobe again']))}/{len(prompts)}")  # fmt: skip


if __name__ == "__main__":
    main()
