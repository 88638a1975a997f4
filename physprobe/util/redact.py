"""Secrets never shown: the one scrubber every line physprobe prints or logs from a server passes through.

``scrub`` removes what a credential is known or shaped to be, never a word because of the word before it:

- each secret it is given (a server key, the credentials of a ``base_url``: known exactly), however a server or
  library quotes it (as it is, escaped as Python's ``repr`` or JSON escape it, URL-encoded, stripped of surrounding
  whitespace);
- the value of an ``Authorization``, ``Proxy-Authorization``, ``api-key`` or ``x-api-key`` header (``name: value``,
  ``name=value``, ``'name': 'value'``), after its scheme (``Bearer``, ``Basic``, ``Token``) where it has one;
- a ``Bearer``/``Token`` credential shaped like a key (``KEY_SHAPE``: 16 or more characters of a token's alphabet,
  letters and digits both) and a ``Basic`` one that decodes to ``user:password``;
- a provider's key wherever it stands (``hf_`` and 30 or more letters and digits, ``sk-`` and 20 or more of
  ``[A-Za-z0-9_-]``);
- the credentials of any URL (``http://user:password@host``).

``escaped`` writes control and bidirectional characters as their escapes, and ``printable`` makes a server's text
one printable line of them, so an answer can neither break the line nor reorder what is shown around it.

>>> scrub("refused 'Bearer sk-abc\\\\r' for key sk-abc\\r", ["sk-abc\\r"])
"refused 'Bearer ***' for key ***"
>>> scrub('{"headers": {"authorization": "Basic dXNlcjpwdw==", "X-Api-Key": "k-1"}}', [])
'{"headers": {"authorization": "Basic ***", "X-Api-Key": "***"}}'
>>> scrub("cannot reach http://me:pw-1@host:8000/v1 with Bearer 9f8e7d6c5b4a39281706", [])
'cannot reach http://***@host:8000/v1 with Bearer ***'
>>> scrub("Basic nurse 's equipment ! The Hugging Face token of alice is read-only")  # words, not credentials
"Basic nurse 's equipment ! The Hugging Face token of alice is read-only"
>>> printable("bad\\nline \\u202eevil")
'bad line \\\\u202eevil'
"""

from __future__ import annotations

import binascii
import json
import re
from base64 import b64decode
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

HIDDEN = "***"
SECRET_LENGTH = 8  # characters: a URL's password shorter than this is scrubbed from URLs and headers only
_SEPARATOR = r"(\s+|%20|\+)"  # between a scheme and its credential: spaces, or as a URL encodes them
KEY_SHAPE = r"(?=[A-Za-z0-9_.~+/-]*[0-9])(?=[A-Za-z0-9_.~+/-]*[A-Za-z])[A-Za-z0-9_.~+/-]{16,}=*"  # a token: 16+ of its alphabet, letters and digits
_HEADER = re.compile(r"""(?ix)\b((?:proxy-)?authorization|(?:x-)?api[-_]?key)   # the header's name
                         (['"]?\s*[:=]\s*['"]?)                                   # its separator, quoted or not
                         ((?:Bearer|Basic|Token)\s+)?                             # its scheme, if any
                         ([^\s'",;}\]\\]+)""")  # its value
_BEARER = re.compile(rf"(?i)(?<![\w-])(Bearer|Token){_SEPARATOR}({KEY_SHAPE})")
_BASIC = re.compile(rf"(?i)(?<![\w-])(Basic){_SEPARATOR}([A-Za-z0-9+/]{{4,}}={{0,2}})(?![\w+/=-])")
_PROVIDER_KEY = re.compile(r"(?<![\w-])(?:hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,})")  # Hugging Face's, OpenAI's and alike
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s'\"]+@")  # a URL's user:password@


def _forms(secret: str) -> set[str]:
    """How ``secret`` may appear in a text: as it is, stripped, and as repr, JSON and URLs escape it."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    return {form for form in forms if form}


def known(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every form of each of ``secrets`` replaced by ``***`` (longest forms first, so no part of one
    survives) and nothing else changed: the secrets known exactly.

    >>> known("key sk-1 quoted as 'sk-1\\\\n'", ["sk-1\\n"])
    "key *** quoted as '***'"
    """
    for form in sorted({form for secret in secrets if secret for form in _forms(secret)}, key=len, reverse=True):
        text = text.replace(form, HIDDEN)
    return text


def known_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with only the secrets physprobe knows hidden: each of ``secrets`` in every form (``known``) and the
    credentials of any URL (``without_url_credentials``); nothing else changed, however it is shaped. What a model
    answered is stored so (``scrub`` is for the lines physprobe prints from a server).

    >>> known_secrets("Authorization: granted, Bearer sk-1 via http://me:pw@host/v1", ["sk-1"])
    'Authorization: granted, Bearer *** via http://***@host/v1'
    """
    return without_url_credentials(known(text, secrets))


def _basic(match: re.Match) -> str:
    """A ``Basic`` credential hidden where it is one: Base64 of ``user:password``; a word after "Basic" kept."""
    try:
        decoded = b64decode(match.group(3), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{HIDDEN}" if ":" in decoded else match.group(0)


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` (``known``) and every text shaped like a credential replaced by ``***``: a
    header's value, a ``Bearer``/``Token`` key, a ``Basic`` user and password, a provider's key, a URL's credentials."""
    text = without_url_credentials(known(text, secrets))
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{HIDDEN}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    text = _BASIC.sub(_basic, text)
    return _PROVIDER_KEY.sub(HIDDEN, text)


def without_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***`` (nothing else changed).

    >>> without_url_credentials("base_url=http://me:pw-1@host/v1, mean token loss")
    'base_url=http://***@host/v1, mean token loss'
    """
    return _USERINFO.sub(lambda m: f"{m.group(1)}{HIDDEN}@", text)


def each_text(value, change):
    """``value`` (JSON-like: texts, lists, dicts) with ``change`` applied to every text in it.

    >>> each_text({"model_args": {"base_url": "http://me:pw-1@host/v1"}, "n": 3}, without_url_credentials)
    {'model_args': {'base_url': 'http://***@host/v1'}, 'n': 3}
    """
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [each_text(v, change) for v in value]
    if isinstance(value, dict):
        return {k: each_text(v, change) for k, v in value.items()}
    return value


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries (``user:password@``), in the forms a server may quote them back: the password,
    the user and password, and their HTTP Basic encoding; each of at least ``SECRET_LENGTH`` characters (a shorter
    one is no text a scrub could tell from ordinary words: ``scrub`` removes it from URLs and headers only).

    >>> url_secrets("http://me:pw-123456@host/v1"), url_secrets("http://me:pw@host/v1"), url_secrets("http://host/v1")
    (['pw-123456', 'me:pw-123456', 'bWU6cHctMTIzNDU2'], ['bWU6cHc='], [])
    """
    from base64 import b64encode
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    pair = f"{user}:{password}"
    return [s for s in (password, pair, b64encode(pair.encode()).decode()) if len(s) >= SECRET_LENGTH]


def escaped(text: str) -> str:
    """``text`` with every character Python would not print (controls, line breaks, bidirectional overrides) as its
    escape: what a card, a report or an error line shows of a text physprobe did not write.

    >>> escaped("model\\u202e\\tx")
    'model\\\\u202e\\\\tx'
    """
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def printable(text: str, limit: int = 300) -> str:
    """``text`` on one printable line of at most ``limit`` characters: whitespace runs as one space, other
    characters Python would not print (controls, bidirectional overrides) as their escapes."""
    shown = escaped(" ".join(text.split()))
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
