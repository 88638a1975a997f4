"""``--model-args device_map=auto,max_memory=...``: accelerate's big-model dispatch (layers on ``cpu``, the rest
offloaded to ``disk``) scores every engine exactly as the model loaded whole does."""

import json

import pyarrow.parquet as pq
import pytest
import torch
import transformers

from physprobe.backends.hf.model import input_device
from physprobe.cli import main

# (family, tiny model kind (conftest.tiny_model), protocol, share of the weights' bytes allowed on cpu). The tiny BERT keeps its embeddings and
# tied head on cpu only from 0.8 (below: all on disk, or accelerate 1.15's tied-weight IndexError at 0.7).
ENGINES = [
    ("causal", "causal", "sentence-sum", 0.5),  # sequences: the shared-prefix KV cache
    ("causal", "causal", "released-gpt", 0.5),  # mean_ids
    ("causal", "causal", "sentence-sum", 0.0),  # all on disk: the first weights are on the meta device
    ("mlm", "masked", "released-mlm", 0.9),  # masked: the MLM head at the mask
    ("seq2seq", "seq2seq", "released-t5", 0.5),  # seq2seq: encoder once, targets in the decoder
]


def _share_of_the_weights(auto, folder, share: float) -> str:
    model = auto.from_pretrained(folder)
    return f"{int(sum(p.numel() * p.element_size() for p in model.parameters()) * share) // 1024}KiB"


@pytest.mark.parametrize(("family", "kind", "protocol", "share"), ENGINES, ids=[f"{e[2]}-{e[3]}" for e in ENGINES])
def test_cpu_and_disk_offload_scores_equal_the_whole_model(prost_build, tiny_model, tmp_path, family, kind, protocol, share):
    rows = pq.read_table(prost_build / "default" / "test-00000-of-00001.parquet").to_pylist()[:300]
    model = tiny_model(kind, [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in rows], "model")
    auto = getattr(transformers, {"causal": "AutoModelForCausalLM", "mlm": "AutoModelForMaskedLM",
                                  "seq2seq": "AutoModelForSeq2SeqLM"}[family])  # fmt: skip
    budget = _share_of_the_weights(auto, model, share)
    dispatch = f"device_map=auto,max_memory=cpu:{budget},offload_folder={tmp_path / 'offload'}"
    placed = auto.from_pretrained(model, device_map="auto", max_memory={"cpu": budget}, offload_folder=tmp_path / "check")
    # really split: some layers on cpu, some on disk (or all on disk)
    assert set(placed.hf_device_map.values()) == ({"cpu", "disk"} if share else {"disk"})
    assert share or next(placed.parameters()).device.type == "meta"
    assert input_device(placed) == torch.device("cpu")  # not the meta device of the offloaded weights

    scores = {}
    for name, extra in (("whole", []), ("dispatched", ["--model-args", dispatch])):
        out = tmp_path / name
        argv = ["score", "--model", str(model), "--benchmark", "prost", "--data", str(prost_build.parent), "--out", str(out),
                "--protocol", protocol, "--limit", "12", "--device", "cpu", "--bootstrap-iters", "0", *extra]  # fmt: skip
        assert main(argv) == 0
        scores[name] = pq.read_table(out / "predictions.parquet").to_pylist()
    assert json.loads((tmp_path / "dispatched" / "run.json").read_text())["backend"]["device"] == "cpu"
    whole, dispatched = scores["whole"], scores["dispatched"]
    assert whole and [r["row"] for r in whole] == [r["row"] for r in dispatched]
    for a, b in zip(whole, dispatched):
        assert a["prediction"] == b["prediction"]
        assert b["scores"] == pytest.approx(a["scores"], abs=1e-5, nan_ok=True)
