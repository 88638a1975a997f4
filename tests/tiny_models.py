"""Tiny random-initialised models of each family, with tokenizers trained on benchmark text.

Each is saved with ``save_pretrained`` so that tests load it through the real ``from_pretrained`` path.
"""

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

SENTINELS = ["<extra_id_0>", "<extra_id_1>"]


def _bpe(texts, vocab_size=600, extra=()):
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<pad>", "<s>", *extra],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def _wordpiece(texts, vocab_size=600):
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tokenizer


def causal_lm(folder: Path, texts, layers=2, width=64, seed=0) -> Path:
    torch.manual_seed(seed)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(texts), unk_token="<unk>", pad_token="<pad>",
                                        bos_token="<s>", eos_token="<s>")  # fmt: skip
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=width, n_layer=layers, n_head=4,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _bert_tokenizer(texts):
    return PreTrainedTokenizerFast(tokenizer_object=_wordpiece(texts), unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")  # fmt: skip


def _bert_config(tokenizer, **extra):
    return BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=256, **extra)  # fmt: skip


def masked_lm(folder: Path, texts, seed=0) -> Path:
    torch.manual_seed(seed)
    tokenizer = _bert_tokenizer(texts)
    BertForMaskedLM(_bert_config(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def nli(folder: Path, texts, seed=0) -> Path:
    torch.manual_seed(seed)
    tokenizer = _bert_tokenizer(texts)
    labels = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    config = _bert_config(tokenizer, num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def seq2seq(folder: Path, texts, seed=0) -> Path:
    torch.manual_seed(seed)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(texts, extra=SENTINELS), unk_token="<unk>", pad_token="<pad>",
                                        eos_token="<s>", additional_special_tokens=SENTINELS)  # fmt: skip
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
                      decoder_start_token_id=tokenizer.pad_token_id, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id)  # fmt: skip
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def benchmark_texts(built: Path) -> list[str]:
    """Texts of every benchmark built under ``built`` (PROST's questions with their options, CConS's prompts,
    NEWTON's track-3 questions, Text2Afford's sentences): what a tiny model's vocabulary is trained on, so the
    four benchmarks' words are in it."""
    import datasets

    prost = datasets.load_dataset(str(built / "prost"), "default", split="test")
    texts = [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in prost.select(range(0, 18736, 40))]
    texts += datasets.load_dataset(str(built / "cccons"), "ordinary", split="test")["generative_input"]
    texts += datasets.load_dataset(str(built / "newton"), "track3", split="test").select(range(200))["question"]
    texts += datasets.load_dataset(str(built / "text2afford"), "default", split="test")["sentence"]
    return texts
