"""physprobe's own metric path (``metric_modules.load``: input checks, then the numpy core, no Arrow round
trip) gives exactly what ``evaluate.load(...).compute`` gives, breakdowns included, and rejects the same
bad inputs with the same messages."""

import evaluate
import numpy as np
import pytest

from physprobe.protocols import metric_modules

from .conftest import REPO
from .test_metric_inputs import LABEL_CASES


@pytest.fixture(scope="module", params=metric_modules.NAMES)
def both(request):
    name = request.param
    return name, evaluate.load(str(REPO / "metrics" / name)), metric_modules.load(name)


def _probe_cases(rng):
    n = 240
    groups = rng.choice(["mass", "height", "circumference"], n).tolist()
    templates = [f"{g}-{t}" for g, t in zip(groups, rng.integers(0, 4, n).tolist())]  # a template in one group
    pairs = [f"{g}-pair{p}" for g, p in zip(groups, rng.integers(0, 3, n).tolist())]
    base = {"predictions": rng.integers(0, 4, n).tolist(), "references": rng.integers(0, 4, n).tolist()}
    yield base
    yield {**base, "num_choices": 4}
    for position_reading in ("template_mean", "question_mean"):
        for gap in ("pooled", "per_pair"):
            yield {**base, "groups": groups, "templates": templates, "positions": rng.integers(0, 4, n).tolist(),
                   "pairs": pairs, "inverted": (rng.random(n) < 0.5).tolist(), "position_reading": position_reading,
                   "inverse_gap_reading": gap}  # fmt: skip
    yield {**base, "groups": groups}


def _agreement_cases(rng):
    n = 300
    base = {"predictions": rng.integers(0, 4, n).tolist(), "references": rng.integers(0, 4, n).tolist()}
    yield base
    for reading in ("per_question", "global"):
        yield {**base, "agreements": rng.random(n).round(3).tolist(), "groups": rng.choice(["a", "b", "c"], n).tolist(),
               "polarities": rng.choice(["pos", "neg"], n).tolist(), "by_position": True, "reading": reading}  # fmt: skip


def _rank_cases(rng):
    n, classes = 500, 15
    scores = rng.random((n, classes)).round(2)  # rounded: ties happen
    labels = (rng.random((n, classes)) < 0.3).astype(int)
    for mode in ("pairwise", "strict"):
        for ties in ("wrong", "correct"):
            for average in ("micro", "macro"):
                yield {"predictions": scores.tolist(), "references": labels.tolist(), "mode": mode, "ties": ties,
                       "average": average}  # fmt: skip
    yield {"predictions": scores.tolist(), "references": labels.tolist(), "k": 5}
    yield {"predictions": (scores > 0.5).astype(int).tolist(), "references": labels.tolist()}  # YES=1 / NO=0


CASES = {"probe_accuracy": _probe_cases, "agreement_accuracy": _agreement_cases, "affordance_rank": _rank_cases}


def test_direct_path_equals_evaluate_compute(both):
    name, module, direct = both
    cases = list(CASES[name](np.random.default_rng(0)))
    assert len(cases) >= 3
    for kwargs in cases:
        assert direct.compute(**kwargs) == module.compute(**kwargs), (name, sorted(kwargs))


def test_direct_path_takes_numpy_arrays_as_evaluate_does(both):
    name, module, direct = both
    kwargs = next(CASES[name](np.random.default_rng(1)))
    arrays = {k: np.asarray(v) for k, v in kwargs.items() if k in ("predictions", "references")}
    assert direct.compute(**arrays) == module.compute(**kwargs)


@pytest.mark.parametrize("kwargs, message", LABEL_CASES)
def test_direct_path_rejects_what_compute_rejects(kwargs, message):
    for name in ("probe_accuracy", "agreement_accuracy"):
        with pytest.raises(ValueError, match=message):
            evaluate.load(str(REPO / "metrics" / name)).compute(**kwargs)
        with pytest.raises(ValueError, match=message):
            metric_modules.load(name).compute(**kwargs)


def test_direct_rank_rejects_non_binary_references():
    with pytest.raises(ValueError, match=r"references\[1\] is not binary"):
        metric_modules.load("affordance_rank").compute(predictions=[[0.1, 0.2], [0.3, 0.4]], references=[[0, 1], [2, 0]])
