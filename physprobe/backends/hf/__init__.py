"""The ``hf`` backend: Hugging Face models in this process, through ``transformers`` (a GGUF file too).

It serves every request type with physprobe's exact engines (``scoring``: causal log-likelihoods, each question's
shared prefix once, on the packed tree plan of ``packed`` or the cached plan; ``masked``, ``seq2seq``, ``nli``; and
``generation``: batched greedy decoding; their batching in ``batching``, what a model's attention takes in
``attention``), and resolves what a
request leaves to the tokenizer (``mean_token_ids``, ``seq2seq_targets``, ``first_token_choices``). A chat
template is applied here, and only here (``Templating.render``), as ``physprobe.backends.base`` describes.

>>> from physprobe.requests import MeanTokens
>>> class Words:  # a tokenizer of whole words, ids by first letter, BOS 1 and EOS 2
...     bos_token_id, eos_token_id = 1, 2
...     def __call__(self, text, add_special_tokens=False):
...         return {"input_ids": [ord(w[0]) for w in text.split()]}
>>> mean_token_ids(MeanTokens(options=(("A", " coin", " falls."),)), Words())
[[1, 65, 99, 102, 2]]
"""

from __future__ import annotations

import time
import unicodedata

from physprobe.backends.base import Backend, BackendError, Chat, Settings, messages, prompt_text, template_hash
from physprobe.requests import Choice, Entailment, Generate, GenerateEach, Masked, MaskedPair, MeanTokens, Seq2Seq, YesNo

# Entailment readings -> the engine's (softmax_across: raw logits, softmaxed across the request's pairs).
READINGS = {"three_way": "three_way", "vs_contradiction": "vs_contradiction", "softmax_across": "logit"}


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def gpt_named(name: str) -> bool:
    """Whether a tokenizer's name starts with ``gpt``, read on the last part of its path (the Hub's
    ``openai-community/gpt2`` and a local ``models/gpt2`` as ``gpt2``), as PROST's released
    ``input_pipeline.py:88`` tests ``tokenizer.name_or_path.startswith('gpt')``.

    >>> gpt_named("gpt2-medium"), gpt_named("openai-community/gpt2"), gpt_named("openai-gpt"), gpt_named("./models/gpt2")
    (True, True, False, True)
    >>> gpt_named("HuggingFaceTB/SmolLM2-135M-Instruct")
    False
    """
    return name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].startswith("gpt")


def mean_token_ids(request: MeanTokens, tokenizer) -> list[list[int]]:
    """The token ids of each option of a ``MeanTokens`` request.

    ``specials="bos_eos"``: the segments encoded apart without special tokens, concatenated, framed by the
    tokenizer's BOS and EOS where it has them. ``"gpt_names"``: that for a tokenizer whose name starts with
    ``gpt`` (``gpt_named``); any other encodes the option's text whole as it does, its own special tokens
    included, with its pad token standing for the middle segment, whose own tokens (encoded without special
    tokens) then replace the pad (PROST's released ``input_pipeline.py:88-110``)."""
    if request.specials not in ("bos_eos", "gpt_names"):
        raise BackendError(f"MeanTokens specials {request.specials!r} is not one the hf backend knows (bos_eos, gpt_names)")
    if request.specials == "gpt_names" and not gpt_named(tokenizer.name_or_path):
        if tokenizer.pad_token_id is None:
            raise BackendError(f"tokenizer {tokenizer.name_or_path!r} has no pad (or end-of-sequence) token to stand for the "
                               "option while the text is encoded whole; choose a protocol that frames it with BOS and EOS")  # fmt: skip
        spliced = []
        for before, option, after in request.options:
            ids = tokenizer(f"{before}{tokenizer.pad_token}{after}")["input_ids"]
            at = ids.index(tokenizer.pad_token_id, 1)
            spliced.append(ids[:at] + _ids(tokenizer, option) + ids[at + 1 :])
        return spliced
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    return [bos + [i for segment in option for i in _ids(tokenizer, segment)] + eos for option in request.options]


def seq2seq_targets(request: Seq2Seq, tokenizer) -> list:
    """A ``Seq2Seq`` request's targets as the engine takes them: the texts, or with ``first_token_after``
    the token ids ``[that token, the target's first token]`` (PROST's released T5 code)."""
    if request.first_token_after is None:
        return list(request.targets)
    start = tokenizer.convert_tokens_to_ids(request.first_token_after)
    return [[start, _ids(tokenizer, target)[0]] for target in request.targets]


def first_token_choices(request: Generate, tokenizer) -> list[str]:
    """The choices of a ``Generate`` request with ``first_token_choices``: the first token of each
    ``" choice"``, decoded together and split on spaces (PROST's released ``zs_runner.py:161``)."""
    return tokenizer.decode([_ids(tokenizer, f" {choice}")[0] for choice in request.choices]).split()


class Templating:
    """A tokenizer's chat template under a run's ``Chat`` setting: whether it applies to a request type,
    and the prompt as the model then reads it (``physprobe.backends.base`` says when it applies)."""

    def __init__(self, tokenizer, chat: Chat, model_name: str = "the model"):
        self.tokenizer, self.chat, self.model_name = tokenizer, chat, model_name

    def template(self) -> str | None:
        """The text of the template the run names (``Chat.template``: one of the tokenizer's named templates),
        else of the tokenizer's default one; None when it has none."""
        name, templates = self.chat.template, self.tokenizer.chat_template
        if name is not None:
            named = sorted(templates) if isinstance(templates, dict) else []
            if name not in named:
                known = f"its named templates: {', '.join(named)}" if named else "give --apply-chat-template without a name"
                raise BackendError(f"--apply-chat-template {name}: {self.model_name} has no chat template named {name!r}; {known}")
        try:
            return self.tokenizer.get_chat_template(name)
        except ValueError:  # no template (or several, none of them the default)
            return None

    def applied(self, request_type: type) -> bool:
        """Whether ``request_type``'s prompts go through the template; an error when the run asks a template
        the tokenizer lacks, or a template or instruction of a request type without a prompt."""
        self.chat.check(request_type)
        template = self.template()
        applied = self.chat.applies(request_type, has_template=template is not None)
        if applied and template is None:
            raise BackendError(f"--apply-chat-template: {self.model_name} has no default chat template (its tokenizer's "
                               "chat_template is empty); leave the option out")  # fmt: skip
        return applied

    def render(self, prompt: str, request_type: type) -> str:
        """A prompt as the model reads it: through the template (generation prompt added) when it applies to
        ``request_type``, else with the system instruction and a blank line before it, if any."""
        if not self.applied(request_type):
            return prompt_text(prompt, self.chat, templated=False)
        return self.tokenizer.apply_chat_template(messages(prompt, self.chat), chat_template=self.chat.template,
                                                  add_generation_prompt=True, tokenize=False)  # fmt: skip


def score_loaded(loaded, requests: list, chat: Chat | None = None, truncate: bool = False, progress=None) -> list[list]:
    """Results of requests of one type (``physprobe.backends.base`` says what each is) from a model already
    in memory (``physprobe.backends.hf.model.Loaded``), under a chat setting (None: ``Chat()``, auto)."""
    templating = Templating(loaded.tokenizer, chat or Chat())
    engine = {Choice: _choice, MeanTokens: _mean_tokens, Masked: _masked, MaskedPair: _masked_pair, Seq2Seq: _seq2seq,
              Entailment: _entailment, YesNo: _yes_no, Generate: _generate, GenerateEach: _generate_each}[type(requests[0])]  # fmt: skip
    return engine(loaded, requests, templating, {"progress": progress, "truncate": truncate, **loaded.batching})


def _choice(loaded, requests: list[Choice], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import scoring

    texts = [[templating.render(r.context, Choice) + c for c in r.continuations] for r in requests]
    return scoring.sequence_logprobs(loaded.model, loaded.tokenizer, texts, loaded.device, bos=not templating.applied(Choice), **options)


def _mean_tokens(loaded, requests: list[MeanTokens], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import scoring

    templating.applied(MeanTokens)  # checks the setting asks nothing of token sequences
    ids = [mean_token_ids(r, loaded.tokenizer) for r in requests]
    return scoring.mean_token_logprobs(loaded.model, loaded.tokenizer, ids, loaded.device, **options)


def _masked(loaded, requests: list[Masked], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import masked

    templating.applied(Masked)
    tokenizer = loaded.tokenizer
    sep = getattr(tokenizer, "sep_token", None) or getattr(tokenizer, "eos_token", None) or "[SEP]"
    texts = [r.text.replace("[SEP]", sep) for r in requests]
    return masked.masked_logprobs(loaded.model, tokenizer, texts, [r.candidates for r in requests], loaded.device, **options)


def lower_cased(text: str, tokenizer) -> str:
    """``text`` as a tokenizer loaded with ``do_lower_case=True`` reads it: lower-cased and accents stripped
    (BERT's normaliser) by a cased tokenizer that takes the option; as it is otherwise (an uncased tokenizer
    lower-cases it anyway; BPE tokenizers ignore the option).

    >>> class Cased:
    ...     do_lower_case = False
    >>> lower_cased("Café Kittens", Cased()), lower_cased("Café Kittens", object())
    ('cafe kittens', 'Café Kittens')
    """
    if getattr(tokenizer, "do_lower_case", None) is not False:
        return text
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")


def _masked_pair(loaded, requests: list[MaskedPair], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import masked

    templating.applied(MaskedPair)
    tokenizer, first = loaded.tokenizer, requests[0]
    pairs = [(r.first, r.second, r.words) if not r.lower_case else
             (lower_cased(r.first, tokenizer), lower_cased(r.second, tokenizer).replace("[mask]", "[MASK]"), r.words)
             for r in requests]  # fmt: skip
    return masked.masked_pair_logprobs(loaded.model, tokenizer, pairs, loaded.device, token_type_ids=first.token_type_ids,
                                        unknown_as_unk=first.unknown_as_unk, **options)  # fmt: skip


def _seq2seq(loaded, requests: list[Seq2Seq], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import seq2seq

    templating.applied(Seq2Seq)
    questions = [(r.source, seq2seq_targets(r, loaded.tokenizer)) for r in requests]
    return seq2seq.seq2seq_logprobs(loaded.model, loaded.tokenizer, questions, loaded.device, **options)


def _split(values: list, widths: list[int]) -> list[list]:
    rows, at = [], 0
    for width in widths:
        rows.append(values[at : at + width])
        at += width
    return rows


def _entailment(loaded, requests: list[Entailment], templating: Templating, options: dict) -> list[list]:
    import torch

    from physprobe.backends.hf import nli

    templating.applied(Entailment)
    progress = options.pop("progress")
    options.pop("truncate")  # the NLI engine takes pairs whole
    reading = requests[0].reading
    flat = [pair for r in requests for pair in r.pairs]
    values = nli.entailment_probs(loaded.model, loaded.tokenizer, flat, loaded.device, reading=READINGS[reading], **options)
    rows = _split(values, [len(r.pairs) for r in requests])
    if reading == "softmax_across":
        rows = [torch.softmax(torch.tensor(row), dim=0).tolist() for row in rows]
    if progress is not None:
        progress.update(len(requests))
    return rows


def _yes_no(loaded, requests: list[YesNo], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import scoring

    progress = options.pop("progress")
    options.pop("truncate")  # the YES/NO engine reads prompts whole
    flat = [templating.render(p, YesNo) for r in requests for p in r.prompts]
    values = scoring.yes_probs(loaded.model, loaded.tokenizer, flat, loaded.device, seq2seq=loaded.family == "seq2seq",
                               bos=not templating.applied(YesNo), **options)  # fmt: skip
    if progress is not None:
        progress.update(len(requests))
    return _split(values, [len(r.prompts) for r in requests])


def _generate(loaded, requests: list[Generate], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import generation

    asks = [{"prompt": templating.render(r.prompt, Generate), "max_new_tokens": r.max_new_tokens, "stop": list(r.stop)}
            for r in requests]  # fmt: skip
    texts = generation.generate(loaded.model, loaded.tokenizer, asks, loaded.device, seq2seq=loaded.family == "seq2seq",
                                chat=templating.applied(Generate), **options)  # fmt: skip
    return [[text, *(first_token_choices(r, loaded.tokenizer) if r.first_token_choices else [])] for text, r in zip(texts, requests)]


def _generate_each(loaded, requests: list[GenerateEach], templating: Templating, options: dict) -> list[list]:
    from physprobe.backends.hf import generation

    progress = options.pop("progress")
    asks = [{"prompt": templating.render(p, GenerateEach), "max_new_tokens": r.max_new_tokens, "stop": list(r.stop)}
            for r in requests for p in r.prompts]  # fmt: skip
    texts = generation.generate(loaded.model, loaded.tokenizer, asks, loaded.device, seq2seq=loaded.family == "seq2seq",
                                chat=templating.applied(GenerateEach), **options)  # fmt: skip
    if progress is not None:
        progress.update(len(requests))
    return _split(texts, [len(r.prompts) for r in requests])


def computed_dtype(model) -> str:
    """The dtype a loaded model computes in (its parameters'; no engine autocasts), as ``--dtype`` names it: what
    ``--dtype auto`` resolved to, recorded in run.json.

    >>> import torch
    >>> computed_dtype(torch.nn.Linear(2, 2).to(torch.bfloat16))
    'bfloat16'
    """
    return str(getattr(model, "dtype", None) or next(model.parameters()).dtype).removeprefix("torch.")


def recorded_args(kwargs: dict) -> dict:
    """The ``from_pretrained`` options that change a score, as the cache key and run.json hold them
    (``load_in_8bit``/``4bit`` by their quantization config's settings).

    >>> recorded_args({"revision": "main", "subfolder": "v2"})
    {'revision': 'main', 'subfolder': 'v2'}
    """
    recorded = {k: v for k, v in kwargs.items() if k != "quantization_config"}
    if "quantization_config" in kwargs:
        recorded["quantization_config"] = kwargs["quantization_config"].to_dict()
    return recorded


class HFBackend(Backend):
    """Models loaded in this process with ``transformers`` (``AutoModelFor*`` of the model's family)."""

    name = "hf"
    serves = (Choice, MeanTokens, Masked, MaskedPair, Seq2Seq, Entailment, YesNo, Generate, GenerateEach)

    @staticmethod
    def parse_model_args(text: str | None) -> dict:
        from physprobe import model_options

        return model_options.parse_model_args(text)

    def __init__(self, settings: Settings):
        from physprobe.backends.hf import model

        super().__init__(settings)
        self.plan = model.plan_model(settings.model, settings.method, settings.device, settings.gguf_file,
                                     settings.model_args, settings.dtype, settings.batch_size)  # fmt: skip
        self.family = self.plan.family
        self._tokenizer = None
        self._loaded = None

    @property
    def tokenizer(self):
        """The model's tokenizer (loaded once; enough to build cache keys without the weights)."""
        if self._tokenizer is None:
            from physprobe.backends.hf import model

            self._tokenizer = model.load_tokenizer(self.plan)
        return self._tokenizer

    @property
    def templating(self) -> Templating:
        return Templating(self.tokenizer, self.settings.chat, self.settings.model)

    def chat_applied(self, request_type: type) -> bool:
        return self.templating.applied(request_type)

    def identity(self, request_type: type) -> dict:
        chat = self.settings.chat
        applied = self.chat_applied(request_type)
        return {"backend": self.name, "model": self.plan.revision, "gguf_file": self.plan.kwargs.get("gguf_file"),
                "dtype": self.plan.dtype, "device": self.plan.device.type, "truncate": self.settings.truncate,
                "model_args": recorded_args(self.plan.kwargs),
                "chat": {"applied": applied, "template": chat.template if applied else None,
                         "template_sha256": template_hash(self.templating.template()) if applied else None,
                         "system_instruction": chat.system_instruction}}  # fmt: skip

    def info(self) -> dict:
        loaded = self._loaded
        return {"family": self.family, "device": str(loaded.device if loaded else self.plan.device),
                "model_loaded": loaded is not None, "model_revision": self.plan.revision,
                "gguf_file": self.plan.kwargs.get("gguf_file"),
                "model_args": recorded_args(self.plan.kwargs), "truncate": self.settings.truncate,
                "dtype": computed_dtype(loaded.model) if loaded else self.plan.dtype,
                "batch_size": self.plan.batch_size or "auto"}  # fmt: skip

    def loaded(self):
        """The model, loaded on first use (a fully cached run never loads it)."""
        if self._loaded is None:
            from physprobe.backends.hf import model

            started = time.perf_counter()
            self._loaded = model.load(self.plan, self.tokenizer)
            self.load_seconds = time.perf_counter() - started
        return self._loaded

    def score(self, requests: list, progress=None) -> list[list]:
        return score_loaded(self.loaded(), requests, self.settings.chat, self.settings.truncate, progress)
