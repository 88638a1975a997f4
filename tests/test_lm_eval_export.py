"""``physprobe export lm-eval``: the exported tasks, run by lm-evaluation-harness itself on a tiny GPT-2 and a
tiny T5, decide every question as ``physprobe score`` does with the same protocol, and report the same figures."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from physprobe.cli import main
from physprobe.data import registry
from physprobe.protocols.answers import cut
from physprobe.publish.lm_eval_export import SEQ2SEQ_EOS, exported_tasks
from tests import tiny_models

ROWS = {"prost": 40, "cccons": 12, "newton": 12, "text2afford": 3}


def _small_build(built: Path, out: Path) -> Path:
    """The first rows of each default config (PROST: rows spread over its concepts), as a local build."""
    for benchmark, n in ROWS.items():
        (out / benchmark).mkdir(parents=True)
        shutil.copy(built / benchmark / "README.md", out / benchmark / "README.md")
        for config in registry.builder(benchmark).configs:
            source = built / benchmark / config.name / "test-00000-of-00001.parquet"
            table = pq.read_table(source)
            step = max(1, table.num_rows // n) if benchmark == "prost" else 1
            (out / benchmark / config.name).mkdir()
            pq.write_table(table.take(list(range(0, table.num_rows, step))[:n]), out / benchmark / config.name / source.name)
    return out


def _tiny_gpt2(folder: Path, data: Path) -> Path:
    from tokenizers import processors
    from transformers import AutoTokenizer

    texts = [
        " ".join(map(str, row.values()))
        for parquet in sorted(data.rglob("*.parquet"))
        for row in pq.read_table(parquet).to_pylist()
    ]
    tiny_models.causal_lm(folder, texts)
    # lm-eval's add_bos_token=True asks the tokenizer for its special tokens: give it BOS, which physprobe's generation
    # (prompts encoded as the tokenizer encodes them) then reads too.
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bos = tokenizer.bos_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    tokenizer.save_pretrained(folder)
    return folder


def _lm_eval(model: Path, tasks: list[str], include: Path, out: Path, model_args: str) -> tuple[dict, dict]:
    command = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},{model_args}",
               "--include_path", str(include), "--tasks", ",".join(tasks), "--device", "cpu", "--batch_size", "1",
               "--log_samples", "--output_path", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    samples = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return results, samples


@pytest.mark.slow
@pytest.mark.processes
def test_tasks_exported_to_lm_eval_decide_as_physprobe_score(built_all, tmp_path):
    data = _small_build(built_all, tmp_path / "data")
    model = _tiny_gpt2(tmp_path / "gpt2", data)
    tasks_dir = tmp_path / "tasks"
    assert main(["export", "lm-eval", "--out", str(tasks_dir), "--data", str(data)]) == 0
    causal = {}
    for benchmark in ROWS:
        for path in sorted((tasks_dir / benchmark).glob("physprobe_*.yaml")):
            spec = yaml.safe_load(path.read_text().replace("!function", ""))
            if spec["metadata"]["family"] == "causal":
                causal[spec["task"]] = (benchmark, path.stem, spec)
    # Every benchmark has causal tasks; each names a protocol the scorer knows, for the default configs.
    assert {b for b, _, _ in causal.values()} == set(ROWS)
    generate = [t for t, (_, _, s) in causal.items() if s["output_type"] == "generate_until"]
    choice = [t for t, (_, _, s) in causal.items() if s["output_type"] == "multiple_choice"]
    assert generate and choice

    # add_bos_token=True: a context is encoded after BOS, as physprobe scores it (an empty one is BOS alone).
    results, samples = _lm_eval(model, choice, tasks_dir, tmp_path / "mc", "add_bos_token=True")
    generated_results, generated_samples = _lm_eval(model, generate, tasks_dir, tmp_path / "gen", "add_bos_token=True")
    results.update(generated_results)
    samples.update(generated_samples)
    _assert_decided_as_physprobe_score(causal, results, samples, model, data, tmp_path / "runs")


def _assert_decided_as_physprobe_score(tasks: dict, results: dict, samples: dict, model: Path, data: Path, runs_dir: Path):
    """Each task's logged choices are ``physprobe score``'s predictions with its protocol on the same rows,
    and its ``paper`` figure is the headline run.json records for the config."""
    runs = {}
    for task, (benchmark, _, spec) in tasks.items():
        config = spec["metadata"]["physprobe_config"]
        protocol = spec["metadata"]["physprobe_protocol"]
        key = (benchmark, protocol)
        if key not in runs:
            out = runs_dir / f"{benchmark}-{protocol}"
            assert main(["score", "--model", str(model), "--benchmark", benchmark, "--data", str(data), "--out", str(out),
                         "--protocol", protocol, "--device", "cpu", "--bootstrap-iters", "0"]) == 0  # fmt: skip
            runs[key] = (pq.read_table(out / "predictions.parquet").to_pylist(), json.loads((out / "run.json").read_text()))
        predictions, info = runs[key]
        ours = {r["row"]: r for r in predictions if r["config"] == config}
        logged = samples[task]
        assert logged, task
        if spec["output_type"] == "generate_until":
            for sample in logged:
                row = ours[sample["doc"]["row"]]
                # lm-eval logs the whole answer; the task cuts it at the protocol's stop strings, as physprobe does.
                declared = registry.evaluation(benchmark).protocol(protocol)
                theirs = cut(sample["filtered_resps"][0], declared.stop)
                if declared.max_length is None:
                    assert theirs == row["generated"], (task, sample["doc"]["row"])
                else:  # a released budget that counts the prompt (max_length), which lm-eval's max_gen_toks cannot say:
                    assert theirs.startswith(row["generated"]), (
                        task,
                        sample["doc"]["row"],
                    )  # physprobe's answer is where lm-eval's begins
                if theirs == row["generated"]:
                    assert sample["paper"][1] == row["prediction"]  # protocols.UNPARSED (-2) when no option is named
            assert len(logged) == len(ours)
        elif any(s["doc"]["part"] for s in logged):  # YES/NO: one lm-eval doc per class; the row's YES set
            yes = {}
            for sample in logged:
                ll = [float(r[0]) for r in sample["filtered_resps"]]
                yes.setdefault(sample["doc"]["row"], {})[sample["doc"]["part"]] = ll[0] > ll[1]
            assert set(yes) == set(ours)
            for row, classes in yes.items():
                assert sum(1 << i for i, y in classes.items() if y) == ours[row]["prediction"], (task, row)
        else:
            for sample in logged:
                ll = [float(r[0]) for r in sample["filtered_resps"]]
                row = ours[sample["doc"]["row"]]
                assert ll.index(max(ll)) == row["prediction"], (task, sample["doc"]["row"])
                # physprobe scores after the options' shared prefix (it cancels): compare the differences.
                assert [x - ll[0] for x in ll] == pytest.approx([x - row["scores"][0] for x in row["scores"]], abs=1e-3)
            assert len(logged) == len(ours)
        # The aggregate: lm-eval's "paper" figure is the headline physprobe's run.json records for the config.
        figure = results[task]["paper,none"]
        expected = math.nan if info["headline"][config] is None else info["headline"][config][1]
        assert (math.isnan(figure) and math.isnan(expected)) or figure == pytest.approx(expected, abs=1e-9), task


@pytest.mark.slow
@pytest.mark.processes
def test_exported_seq2seq_tasks_in_lm_eval_decide_as_physprobe_score(built_all, tmp_path):
    """lm-eval's seq2seq backend (``backend=seq2seq``: the task's text to the encoder, each choice scored in
    the decoder) on the exported seq2seq tasks, with a tiny random T5.

    What is exported: PROST ``span-sum`` (its default ``released-t5`` scores fixed token ids: not expressible)
    and Text2Afford ``yes-no-logprob-flan-t5`` (its default ``yes-no-flan-t5`` generates an answer per class: not
    expressible; one lm-eval doc per class); CConS and NEWTON have no seq2seq task
    of their own (their generate protocols are one task for both families, run by the causal test). The
    tiny T5's tokenizer appends no end-of-sequence token, so the targets physprobe scores are the tokens
    lm-eval scores (a real T5 tokenizer appends ``</s>``, which lm-eval leaves off: see the export's README).
    """
    data = _small_build(built_all, tmp_path / "data")
    texts = [
        " ".join(map(str, row.values()))
        for parquet in sorted(data.rglob("*.parquet"))
        for row in pq.read_table(parquet).to_pylist()
    ]
    model = tiny_models.seq2seq(tmp_path / "t5", texts)
    tasks_dir = tmp_path / "tasks"
    assert main(["export", "lm-eval", "--out", str(tasks_dir), "--data", str(data)]) == 0
    seq2seq = {}
    for benchmark in ROWS:
        for path in sorted((tasks_dir / benchmark).glob("physprobe_*.yaml")):
            spec = yaml.safe_load(path.read_text().replace("!function", ""))
            if spec["metadata"]["family"] == "seq2seq":
                seq2seq[spec["task"]] = (benchmark, path.stem, spec)
    protocols = sorted((b, s["metadata"]["physprobe_protocol"], s["output_type"]) for b, _, s in seq2seq.values())
    assert protocols == [("prost", "span-sum", "multiple_choice"), ("text2afford", "yes-no-logprob-flan-t5", "multiple_choice")]
    readme = [line for line in (tasks_dir / "README.md").read_text().splitlines() if line.startswith("| physprobe_")]
    assert all(SEQ2SEQ_EOS in line for line in readme if "_seq2seq |" in line) and not any(
        SEQ2SEQ_EOS in line for line in readme if "_seq2seq |" not in line
    )

    results, samples = _lm_eval(model, list(seq2seq), tasks_dir, tmp_path / "lm", "backend=seq2seq")
    assert len(samples["physprobe_prost_default_span_sum_seq2seq"]) == ROWS["prost"]
    assert (
        len(samples["physprobe_text2afford_default_yes_no_logprob_flan_t5_seq2seq"]) == ROWS["text2afford"] * 15
    )  # a doc per class
    _assert_decided_as_physprobe_score(seq2seq, results, samples, model, data, tmp_path / "runs")


def test_exported_tasks_follow_the_scorers_defaults_and_say_what_they_replaced(built_all):
    import datasets

    rows = {config: datasets.Dataset.from_parquet(str(built_all / "prost" / config / "test-00000-of-00001.parquet"))[0]
            for config in registry.evaluation("prost").configs}  # fmt: skip
    tasks = exported_tasks("prost", rows)
    assert [(c, f, p) for c, f, p, _ in tasks] == [("default", "causal", "sentence-sum"), ("default", "seq2seq", "span-sum")]
    assert tasks[0][3] == ("default 'released-gpt' asks for mean log-probabilities of the options' tokens (its input depends on "
                           "the tokenizer), which lm-eval cannot express; exported 'sentence-sum'")  # fmt: skip
    assert "released-t5" in tasks[1][3] and "Seq2Seq" not in tasks[1][3]


def test_export_of_a_missing_build_is_a_one_line_error(tmp_path, capsys):
    assert main(["export", "lm-eval", "--out", str(tmp_path / "tasks"), "--data", str(tmp_path / "nothing")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("physprobe: error:") and "physprobe build" in error and error.count("\n") == 1


def test_lm_evals_builtin_prost_task_reads_our_build_as_its_own_data(built_all, tmp_path):
    """lm-eval's own ``prost`` task (a different prompt from every physprobe protocol) pointed at our build:
    the paper's 18,736 questions, and its gold answers and choices are our reference and options."""
    import lm_eval.tasks

    from physprobe.dataset_scripts.prost.evaluation import EVALUATION

    builtin = Path(lm_eval.tasks.__file__).parent / "prost" / "corypaik_prost.yaml"
    spec = builtin.read_text()
    parquet = built_all / "prost" / "default" / "test-00000-of-00001.parquet"
    spec = spec.replace("task: prost", "task: prost_on_physprobe_build").replace("dataset_path: json", "dataset_path: parquet")
    spec = spec.replace("hf://datasets/corypaik/prost/data/default.jsonl", str(parquet))
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "prost_local.yaml").write_text(spec)
    # The task is read from lm-eval's own file above: its index of the other built-in tasks (thousands of files, most of
    # the test's time) is left out.
    manager = lm_eval.tasks.TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False)
    task = manager.load_task_or_group(["prost_on_physprobe_build"])["prost_on_physprobe_build"]
    docs = list(task.test_docs())
    rows = pq.read_table(parquet).to_pylist()
    assert len(docs) == len(rows) == 18736  # PROST paper: 18,736 questions
    for doc, row in zip(docs[::997], rows[::997]):
        assert task.doc_to_target(doc) == EVALUATION.reference(row)[0]
        assert task.doc_to_choice(doc) == [row[o] for o in "ABCD"]


def test_data_paths_of_any_text_are_written_as_yaml_reads_them(built_all, tmp_path):
    odd = tmp_path / "my\nbuild"
    assert main(["export", "lm-eval", "--out", str(tmp_path / "tasks"), "--data", str(odd)]) == 2  # datasets reads no such path
    data = tmp_path / "my #1: build - of {it}"  # a comment mark, a key separator, a list mark, flow syntax
    _small_build(built_all, data)
    assert main(["export", "lm-eval", "--out", str(tmp_path / "tasks"), "--data", str(data)]) == 0
    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_constructor("!function", lambda load, node: ("function", load.construct_scalar(node)))
    for path in sorted((tmp_path / "tasks" / "prost").glob("physprobe_*.yaml")):
        spec = yaml.load(path.read_text(), Loader=loader)  # noqa: S506 (a SafeLoader)
        config = spec["metadata"]["physprobe_config"]
        assert spec["dataset_kwargs"]["data_files"]["test"] == [
            str((data / "prost" / config / "test-00000-of-00001.parquet").resolve())
        ]
        assert spec["process_docs"] == ("function", f"utils.{spec['task'].removeprefix('physprobe_')}_docs")
