"""Secrets never shown: the one scrubber every line physprobe prints or logs from a server passes through.

``scrub`` removes each given secret however a server or library quotes it (as it is, escaped as Python's
``repr`` or JSON escape it, URL-encoded, stripped of surrounding whitespace) and the value of any
``Authorization``, ``Proxy-Authorization``, ``api-key``, ``x-api-key`` header or ``Bearer``/``Basic`` token,
and the credentials of any URL (``http://user:password@host``), whatever the key; ``escaped`` writes control and
bidirectional characters as their escapes, and ``printable`` makes a server's text one printable line of them, so an
answer can neither break the line nor reorder what is shown around it.

>>> scrub("refused 'Bearer sk-abc\\\\r' for key sk-abc\\r", ["sk-abc\\r"])
"refused 'Bearer ***' for key ***"
>>> scrub('{"headers": {"authorization": "Basic dXNlcjpwdw==", "X-Api-Key": "k-1"}}', [])
'{"headers": {"authorization": "Basic ***", "X-Api-Key": "***"}}'
>>> scrub("cannot reach http://me:pw-1@host:8000/v1", [])
'cannot reach http://***@host:8000/v1'
>>> printable("bad\\nline \\u202eevil")
'bad line \\\\u202eevil'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

HIDDEN = "***"
SECRET_LENGTH = 8  # characters: a URL's password shorter than this is scrubbed from URLs and headers only
_SCHEME = re.compile(r"(?i)\b(Bearer|Basic|Token)(\s+|%20|\+)[^\s'\",;}\]\\]+")
_HEADER = re.compile(r"""(?ix)\b((?:proxy-)?authorization|(?:x-)?api[-_]?key)   # the header's name
                         (['"]?\s*[:=]\s*['"]?)                                   # its separator, quoted or not
                         (?!(?:Bearer|Basic|Token)\b)([^\s'",;}\]\\]+)""")  # its value (a scheme: _SCHEME's)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s'\"]+@")  # a URL's user:password@


def _forms(secret: str) -> set[str]:
    """How ``secret`` may appear in a text: as it is, stripped, and as repr, JSON and URLs escape it."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    return {form for form in forms if form}


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every form of each secret, and every credential a header or token scheme carries, replaced
    by ``***`` (longest forms first, so no part of one survives)."""
    forms = sorted({form for secret in secrets if secret for form in _forms(secret)}, key=len, reverse=True)
    for form in forms:
        text = text.replace(form, HIDDEN)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    text = without_url_credentials(text)
    return _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)


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
