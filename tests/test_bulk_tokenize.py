"""Host work in bulk (issue 47): what a request leaves to the tokenizer is resolved for a list of requests in a few
tokenizer calls, with the ids that encoding each text on its own gives (a fast tokenizer and a slow, pure-Python one);
a whole PROST config of 2,000 questions scored by ``physprobe score`` costs a few dozen tokenizer calls."""

import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizer, PreTrainedTokenizerBase

from physprobe.cli import main
from physprobe.data import registry
from physprobe.protocols import tokenized
from physprobe.protocols.requests import MeanTokens, Seq2Seq


class Words(PreTrainedTokenizer):
    """A slow (pure-Python) tokenizer of whole words and punctuation, BOS ``<s>`` before and EOS ``</s>`` after a text
    when special tokens are added."""

    def __init__(self, words, **kwargs):
        self.vocab = {w: i for i, w in enumerate(["<pad>", "<s>", "</s>", "<unk>", *sorted(set(words))])}
        super().__init__(pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>", **kwargs)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def get_vocab(self):
        return dict(self.vocab)

    def _tokenize(self, text, **kwargs):
        return text.replace(".", " .").replace(",", " ,").split()

    def _convert_token_to_id(self, token):
        return self.vocab.get(token, self.vocab["<unk>"])

    def _convert_id_to_token(self, index):
        return {i: w for w, i in self.vocab.items()}[index]

    def build_inputs_with_special_tokens(self, ids, pair=None):
        return [self.bos_token_id, *ids, self.eos_token_id]


@pytest.fixture(scope="module")
def prost_rows(built_all):
    return pq.read_table(built_all / "prost" / "default").slice(0, 300).to_pylist()


@pytest.fixture(scope="module")
def tokenizers(benchmark_texts, prost_rows, tiny_model):
    folder = tiny_model("causal", benchmark_texts, "tiny-causal")
    fast = AutoTokenizer.from_pretrained(folder)
    words = [
        w
        for r in prost_rows
        for text in (r["context"], r["question"], *(r[o] for o in "ABCD"))
        for w in Words._tokenize(None, text)
    ]
    return {"fast": fast, "slow": Words(words)}


def one_by_one(request: MeanTokens, tokenizer) -> list[list[int]]:
    """PROST's released-gpt ids as the earlier code built them, a tokenizer call per text (input_pipeline.py:88-110)."""

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    if request.specials == "gpt_names" and not tokenized.gpt_named(tokenizer.name_or_path):
        spliced = []
        for before, option, after in request.options:
            whole = tokenizer(f"{before}{tokenizer.pad_token}{after}")["input_ids"]
            at = whole.index(tokenizer.pad_token_id, 1)
            spliced.append(whole[:at] + ids(option) + whole[at + 1 :])
        return spliced
    return [
        [tokenizer.bos_token_id] + [i for s in option for i in ids(s)] + [tokenizer.eos_token_id] for option in request.options
    ]


class Counted:
    """A tokenizer whose calls are counted (every other attribute the tokenizer's own)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


@pytest.mark.parametrize("kind", ["fast", "slow"])
@pytest.mark.parametrize(
    "protocol, name", [("released-gpt", "tiny-causal"), ("released-gpt", "gpt2"), ("released-gpt-bos-eos", "tiny-causal")]
)
def test_mean_token_ids_of_many_requests_are_each_texts_own_encoding_in_two_calls(tokenizers, prost_rows, kind, protocol, name):
    tokenizer = tokenizers[kind]
    tokenizer.name_or_path = name  # a 'gpt' name frames the segments with BOS and EOS; another encodes the text whole
    requests = [registry.evaluation("prost").protocol(protocol).build(row, "default") for row in prost_rows]
    counted = Counted(tokenizer)
    assert tokenized.mean_token_ids(requests, counted) == [one_by_one(r, tokenizer) for r in requests]
    assert counted.calls == (2 if protocol == "released-gpt" and name != "gpt2" else 1)  # wholes and options; or segments


@pytest.mark.parametrize("kind", ["fast", "slow"])
def test_seq2seq_targets_and_first_token_choices_are_each_texts_own_encoding(tokenizers, kind):
    tokenizer = Counted(tokenizers[kind])
    requests = [Seq2Seq("The [MASK] is heavier.", ("apple", "ball"), first_token_after="<s>"),
                Seq2Seq("Which rolls?", ("block", "apple")), Seq2Seq("A box.", ("ball",), first_token_after="</s>")]  # fmt: skip
    first = {w: tokenizer.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in ("apple", "ball")}
    start, end = tokenizer.convert_tokens_to_ids("<s>"), tokenizer.convert_tokens_to_ids("</s>")
    assert tokenized.seq2seq_targets(requests, tokenizer) == [
        [[start, first["apple"]], [start, first["ball"]]],
        ["block", "apple"],
        [[end, first["ball"]]],
    ]
    assert tokenizer.calls == 1


def test_encoded_reads_each_distinct_text_once_and_an_empty_one_as_no_tokens():
    seen = []

    def tokenizer(texts, add_special_tokens):
        seen.append((list(texts), add_special_tokens))
        return {"input_ids": [[len(t), 0] if add_special_tokens else [len(t)] for t in texts]}

    assert tokenized.encoded(tokenizer, ["ab", "", "ab", "c"]) == [[2], [], [2], [1]]
    assert tokenized.encoded(tokenizer, ["", "x"], special=True) == [[0, 0], [1, 0]]  # special tokens of an empty text
    assert tokenized.encoded(tokenizer, ["", ""]) == [[], []]  # nothing to encode: no call
    assert seen == [(["ab", "c"], False), (["", "x"], True)]


@pytest.mark.slow
def test_a_prost_config_of_2000_questions_costs_a_few_dozen_tokenizer_calls(
    built_all, benchmark_texts, tiny_model, tmp_path, monkeypatch
):
    """``physprobe score`` of PROST's default config, 2,000 questions, released-gpt with a tokenizer whose name does
    not start with ``gpt`` (the text encoded whole, the option spliced in): the earlier code called the tokenizer eight
    times a question (16,000); now two calls per engine call of 256 questions, one for the prompts' token counts and
    the tokenizer's check at load (``inputs.usable_tokenizer``, two)."""
    model = tiny_model("causal", benchmark_texts, "tiny-causal", layers=1)
    calls = []
    original = PreTrainedTokenizerBase.__call__

    def counted(self, text=None, *args, **kwargs):
        calls.append(len(text) if isinstance(text, list) else 1)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", counted)
    assert main(["score", "--model", str(model), "--benchmark", "prost", "--config", "default", "--limit", "2000", "--data",
                 str(built_all), "--device", "cpu", "--bootstrap-iters", "0", "--out", str(tmp_path / "run")]) == 0  # fmt: skip
    predictions = pq.read_table(tmp_path / "run" / "predictions.parquet")
    assert predictions.num_rows == 2000 and set(predictions.column("status").to_pylist()) == {"decided"}
    engine_calls = -(-2000 // 256)  # 8 engine calls of at most 256 questions
    assert len(calls) == 2 + 1 + 2 * engine_calls <= 50
    assert sum(calls) < 2000 * 4 + 2000 * 4 // 2  # the prompts' 8,000 texts, and far fewer distinct wholes and options
