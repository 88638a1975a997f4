"""How a model's answer is read, whatever backend produced it: a generated text cut at the protocol's stop
strings, and P(YES) of a YES/NO prompt from the two answers' log-likelihoods. Plain Python, no torch: the
server backend and the lm-eval export read answers exactly as the in-process backend does.

>>> cut("(B) ball\\nQuestion: next", ["\\n"])
'(B) ball'
>>> round(yes_probability(-1.0, -2.0), 4)
0.7311
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def cut(text: str, stop: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest of the ``stop`` strings after its leading whitespace: an
    answer that opens with a blank line, as completion models' answers often do, is not cut to nothing.

    >>> cut("yes. And more", [".", "\\n"]), cut("no stop here", []), cut("\\n\\nA box.\\nQ: next", ["\\n"])
    ('yes', 'no stop here', '\\n\\nA box.')
    """
    start = len(text) - len(text.lstrip())
    ends = [end for end in (text.find(s, start) for s in stop if s) if end >= 0]
    return text[: min(ends)] if ends else text


def stopped(text: str, stop: Sequence[str]) -> bool:
    """Whether ``text`` holds one of the ``stop`` strings where ``cut`` looks for them (so more tokens
    cannot change the cut answer).

    >>> stopped("\\n\\nA box", ["\\n"]), stopped("\\n\\nA box.\\n", ["\\n"]), stopped("A box", [])
    (False, True, False)
    """
    return len(cut(text, stop)) < len(text)


def yes_probability(log_yes: float, log_no: float) -> float:
    """P(YES) / (P(YES) + P(NO)) from the log-likelihoods of the two answers: the softmax over the pair,
    written so that no exponential overflows.

    >>> yes_probability(0.0, 0.0), yes_probability(-1000.0, 0.0), yes_probability(0.0, -1000.0)
    (0.5, 0.0, 1.0)
    """
    return 0.5 * (1.0 + math.tanh((log_yes - log_no) / 2.0))
