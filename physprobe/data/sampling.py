"""Which rows a ``--limit`` run scores: one row of every group of the paper's breakdowns first (PROST's concepts,
NEWTON's attributes or scenarios, Text2Afford's classes: ``Evaluation.groups``), then the rest evenly spread.

Benchmarks are ordered (PROST by template, NEWTON by scenario), so the first rows would be one template; and an
even spread alone can miss a small group (PROST ``--limit 20`` held 7 of its 10 concepts), leaving a macro average
over fewer groups than the paper's.

>>> spread(10, 4)
[0, 2, 5, 7]
>>> covering([("a",), ("a",), ("a",), ("a",), ("a",), ("b",)], 2)
[0, 5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def spread(n: int, limit: int | None) -> list[int]:
    """``limit`` row indices evenly spread over ``n`` rows (all rows without a limit).

    >>> spread(10, 4), spread(3, 5)
    ([0, 2, 5, 7], [0, 1, 2])
    """
    if limit is None or limit >= n:
        return list(range(n))
    return [i * n // limit for i in range(limit)]


def covering(groups: Sequence[Sequence[str]], limit: int | None) -> list[int]:
    """``limit`` row indices of rows whose groups are ``groups`` (a row may be in none or several): the first row
    of each group not yet held (groups in the order they first appear; evenly spread over them when there are more
    groups than ``limit``), then the other rows evenly spread; in row order.

    >>> covering([(), ("grasp", "lift"), ("lift",), (), ("throw",), ()], 3)
    [0, 1, 4]
    >>> covering([("x",), ("y",), ("z",), ("w",)], 2)
    [0, 2]
    """
    n = len(groups)
    if limit is None or limit >= n:
        return list(range(n))
    first: dict[str, int] = {}
    for index, names in enumerate(groups):
        for name in names:
            first.setdefault(name, index)
    order = list(first)
    chosen: set[int] = set()
    held: set[str] = set()
    for g in spread(len(order), limit):
        name = order[g]
        if name in held:  # a row chosen for another group holds it too
            continue
        chosen.add(first[name])
        held.update(groups[first[name]])
    rest = [i for i in range(n) if i not in chosen]
    chosen.update(rest[j] for j in spread(len(rest), limit - len(chosen)))
    return sorted(chosen)


def rows_to_score(dataset, config: str, limit: int | None, groups: Callable[[dict, str], Sequence[str]] | None) -> list[int]:
    """The indices of ``dataset``'s rows a run of ``config`` scores: every row without a ``limit``; with one, those
    of ``covering`` the benchmark's ``groups`` (``Evaluation.groups``), else evenly spread."""
    if limit is None or limit >= len(dataset) or groups is None:
        return spread(len(dataset), limit)
    return covering([tuple(groups(row, config)) for row in dataset.to_list()], limit)
