"""The hf backend's model handling: read a model's config and check every option before any weight
loads (``describe_model``), detect its family, then load tokenizer and weights through ``from_pretrained``. A GGUF
file is converted once and read back from the cache afterwards (``physprobe.backends.hf.gguf_cache``)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from physprobe import protocols
from physprobe.backends.hf import gguf_cache, threads
from physprobe.errors import ModelLoadError
from physprobe.protocols import inputs, model_options
from physprobe.util import progress, provenance

FAMILY_CLASSES = {
    "causal": "AutoModelForCausalLM",
    "mlm": "AutoModelForMaskedLM",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "nli": "AutoModelForSequenceClassification",
}


def detect_family(config) -> str:
    """The scoring family of a model, from its config: seq2seq, mlm, nli or causal."""
    architectures = " ".join(config.architectures or [])
    if config.is_encoder_decoder:
        return "seq2seq"
    if "MaskedLM" in architectures:
        return "mlm"
    if "SequenceClassification" in architectures:
        return "nli"
    if "CausalLM" in architectures or "LMHead" in architectures:
        return "causal"
    if not architectures:  # e.g. configs read from GGUF files name only their model type
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

        if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            return "causal"
        if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
            return "mlm"
    raise protocols.ProtocolError(f"cannot tell the model family from architectures={config.architectures}; pass --method")


@dataclass
class ModelFacts:
    """What is known of a model before its weights load: checked options, config, the family its config names
    (``detected``; None: it names none) and the family it is loaded as (``family``: the run's, by default the
    detected one), revision."""

    name: str
    local: bool
    detected: str | None
    kind: str  # what the family was read from: the architectures (physprobe.record.spec's error lines)
    config: object
    family: str | None
    revision: str  # Hub commit, or sha256 of the local folder's files
    device: object  # torch.device
    dtype: str
    kwargs: dict  # for from_pretrained (gguf_file, revision, trust_remote_code, ...)
    batch_size: int | None  # None: token budget, halved on out-of-memory
    converted: gguf_cache.Converted | None = None  # a GGUF file's cache entries
    tokenizer: object = None  # a GGUF file's tokenizer, read with its config (None: ``load_tokenizer`` reads it)


@dataclass
class Loaded:
    model: object
    tokenizer: object
    family: str
    device: object
    batching: dict = field(default_factory=dict)


# Measured with torch 2.13 on this project's CPUs: inductor's C++ code for flex attention under a mask that reads a
# tensor (any padded batch's, physprobe's tree or transformers' own) does not compile ("cur_kvSplitSize5 was not declared").
FLEX_ON_CPU = (
    "--model-args attn_implementation=flex_attention: flex attention does not compile on CPU with a padded "
    "batch's mask (torch 2.13's inductor); use attn_implementation=sdpa (the default) or eager, or score on a GPU"
)


def describe_model(model_name: str, device: str | None = None, gguf_file: str | None = None, model_args: dict | None = None,
               dtype: str | None = None, batch_size: int | None = None) -> ModelFacts:  # fmt: skip
    """Check every model option and read the model's config (no weights): a bad option fails here, in one line."""
    import transformers

    kwargs = dict(model_args or {})
    if gguf_file and kwargs.get("gguf_file", gguf_file) != gguf_file:
        raise model_options.ModelOptionError(
            f"--gguf-file {gguf_file} and --model-args gguf_file={kwargs['gguf_file']} disagree; give one"
        )
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    chosen = model_options.check_device(device)
    if kwargs.get("attn_implementation") == "flex_attention" and chosen.type == "cpu":
        raise model_options.ModelOptionError(FLEX_ON_CPU)
    dtype = model_options.resolve_dtype(dtype, kwargs, chosen.type)
    kwargs.pop("dtype", None)
    local = model_options.looks_local(model_name)
    if local:
        model_options.check_local_model(model_name, kwargs.get("gguf_file"))
    commit = None if local or _offline() else model_options.hub_commit(model_name, kwargs.get("revision"))
    config_kwargs = {k: kwargs[k] for k in ("gguf_file", "revision", "trust_remote_code", "subfolder") if k in kwargs}
    converted = tokenizer = None
    try:
        if "gguf_file" in kwargs:  # config and tokenizer from the file's metadata (or its cache entry); no tensor read
            with progress.bar(f"reading {kwargs['gguf_file']}'s config and tokenizer"):  # a large vocabulary: minutes
                converted = gguf_cache.locate(model_name, local, kwargs)
                config, tokenizer = gguf_cache.metadata(converted, model_name, kwargs)
        else:
            config = transformers.AutoConfig.from_pretrained(model_name, **config_kwargs)
    except ImportError as error:  # e.g. gguf files need the gguf package
        raise model_options.ModelOptionError(
            f"cannot read {model_name!r}: {error}".splitlines()[0] + " (pip install 'physprobe[score]')"
        ) from None
    except (OSError, ValueError, struct.error) as error:  # struct.error: a GGUF file cut short
        from huggingface_hub import constants

        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "gguf_file" in kwargs and local:
            raise model_options.ModelOptionError(f"--gguf-file {kwargs['gguf_file']}: cannot read its metadata ({reason}); "
                                                 "is it a complete GGUF file?") from None  # fmt: skip
        where = "its folder" if local else f"the Hub ({constants.ENDPOINT})"
        raise model_options.ModelOptionError(f"cannot load model {model_name!r} from {where}: {reason}; check the name, "
                                             "or download the model and pass its folder") from None  # fmt: skip
    try:
        detected = detect_family(config)
        kind = " ".join(config.architectures or [config.model_type])
    except protocols.ProtocolError:
        detected, kind = None, f"architectures={config.architectures}"
    revision = commit or provenance.model_revision(
        model_name, local, kwargs.get("revision"), kwargs.get("gguf_file"), kwargs.get("subfolder")
    )
    return ModelFacts(
        model_name, local, detected, kind, config, detected, revision, chosen, dtype, kwargs, batch_size, converted, tokenizer
    )


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE


def load_tokenizer(facts: ModelFacts):
    """The planned model's tokenizer (enough to build requests and look them up in the cache)."""
    import transformers

    tokenizer_kwargs = {
        k: facts.kwargs[k] for k in ("gguf_file", "revision", "trust_remote_code", "subfolder") if k in facts.kwargs
    }
    try:
        if facts.tokenizer is not None:  # a GGUF file's, read with its config
            tokenizer = facts.tokenizer
            tokenizer.name_or_path = facts.name  # as read from the file, not its cache entry (PROST's released-gpt reads it)
        else:
            tokenizer = transformers.AutoTokenizer.from_pretrained(facts.name, **tokenizer_kwargs)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(
            f"{facts.name}: cannot load its tokenizer ({reason}); add the tokenizer files to the model folder"
        ) from None
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    inputs.usable_tokenizer(tokenizer, facts.name)
    return tokenizer


def load(facts: ModelFacts, tokenizer=None) -> Loaded:
    """Load model and tokenizer through ``from_pretrained`` (a GGUF file too) for the planned family.

    A GGUF file's weights come from its cached conversion in the planned dtype where there is one; else they are
    converted from the file and stored there (not when ``device_map`` or quantization places them: those weights
    are not the whole model in one dtype). Progress shows while the weights load (``physprobe.util.progress``). On a
    CPU, torch computes on the threads ``threads.choose`` picks for the model's size.
    """
    import torch

    kwargs = dict(facts.kwargs, dtype=facts.dtype if facts.dtype == "auto" else getattr(torch, facts.dtype))
    cached = facts.converted.weights(facts.dtype) if facts.converted is not None else None
    how = "" if cached is None else " from the cached conversion" if cached.is_dir() else ", converting the GGUF file once"
    with progress.bar(f"loading {model_options.model_shown(facts.name)} ({facts.family}, {facts.dtype}){how}"):
        model = None
        if cached is not None:  # verified against its manifest, else removed with one line and converted again
            entry_kwargs = {k: v for k, v in kwargs.items() if k not in gguf_cache.SOURCE_ARGS}
            model = gguf_cache.read(cached, lambda entry: _from_pretrained(facts, str(entry), entry_kwargs))
        if model is None:
            model = _from_pretrained(facts, facts.name, kwargs)
            if cached is not None and not {"device_map", "quantization_config"} & set(kwargs) and gguf_cache.dequantised(model):
                gguf_cache.store(cached, lambda staging: gguf_cache.save_weights(model, staging))
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(facts)
    if facts.local:
        unchanged_since_described(facts)
    model.eval()
    device = facts.device
    if "device_map" in facts.kwargs:  # accelerate placed the weights (and hooks that move activations between them)
        device = input_device(model)
    else:
        model.to(device)
    threads.choose(model, device)
    batching = {} if facts.batch_size is None else {"max_batch": facts.batch_size, "batch_tokens": 1 << 62}
    return Loaded(model, tokenizer, facts.family, device, batching)


def unchanged_since_described(facts: ModelFacts) -> None:
    """Refuse a local model folder whose content hash, read again once its tokenizer (``HFBackend.describe``) or its
    weights (``load``) are in memory, is no longer the revision read before: the answers and the recorded revision
    then come from the same files (a folder replaced in between would give one model's answers under the other's
    revision, and cache them so). The digests of unchanged files are cached (``provenance.file_digests``), so each
    reading again costs a ``stat`` a file."""
    now = provenance.model_revision(
        facts.name, True, facts.kwargs.get("revision"), facts.kwargs.get("gguf_file"), facts.kwargs.get("subfolder")
    )
    if now != facts.revision:
        raise ModelLoadError(f"--model {facts.name}: the model folder changed while it was loaded; run again")


def _from_pretrained(facts: ModelFacts, source: str, kwargs: dict):
    """The planned family's model class ``from_pretrained(source)``, with SDPA attention where the architecture has it."""
    import transformers

    auto = getattr(transformers, FAMILY_CLASSES[facts.family])
    try:
        if "attn_implementation" in kwargs:
            return auto.from_pretrained(source, **kwargs)
        try:
            return auto.from_pretrained(source, attn_implementation="sdpa", **kwargs)
        except (ValueError, ImportError):  # architectures without SDPA fall back to their default attention
            return auto.from_pretrained(source, **kwargs)
    except (OSError, ValueError, ImportError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(f"cannot load {facts.name!r} as {FAMILY_CLASSES[facts.family]}: {reason}") from None


def input_device(model):
    """Where a model dispatched by accelerate (``device_map``) takes its inputs: accelerate's main device,
    the first device in ``hf_device_map`` that is neither ``cpu`` nor ``disk``; offloaded layers (to ``cpu``
    or ``disk``, whose parameters sit on the meta device) run there too, so caches stay with their layers."""
    import torch

    placed = [d for d in getattr(model, "hf_device_map", {}).values() if d not in ("cpu", "disk")]
    return torch.device(placed[0]) if placed else torch.device("cpu")
