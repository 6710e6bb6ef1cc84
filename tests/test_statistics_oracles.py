"""The hand-written statistics against independent implementations, on generated inputs: exact
McNemar (review/statistics.py) against statsmodels' and scipy's binomial test, Holm (review/
nway.py) against statsmodels' multipletests, Cohen's and Fleiss' kappa (review/agreement.py)
against scikit-learn and statsmodels. Textbook values (tests/test_agreement.py and others)
hold a few points; these hold the formulas everywhere the generators reach, so they cannot
drift. The oracles are test-only dependencies (requirements-dev.txt)."""

from __future__ import annotations

import gc
import math
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss
from statsmodels.stats.multitest import multipletests

from evaluations.review.agreement import Confusion, cohen_kappa, fleiss_kappa
from evaluations.review.nway import holm
from evaluations.review.statistics import mcnemar_exact_p

EXAMPLES = settings(max_examples=100, deadline=None)


@EXAMPLES
@given(b=st.integers(0, 400), c=st.integers(0, 400), a=st.integers(0, 50), d=st.integers(0, 50))
def test_exact_mcnemar_is_statsmodels_and_scipys_binomial_test(b: int, c: int, a: int, d: int) -> None:
    ours = mcnemar_exact_p(b, c)
    theirs = mcnemar([[a, b], [c, d]], exact=True).pvalue  # the concordant cells do not matter
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-300)
    if b + c:
        assert ours == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9, abs=1e-300)


def test_exact_mcnemar_stays_exact_where_floats_underflow() -> None:
    assert mcnemar_exact_p(0, 2000) == 2 / 2**2000 == pytest.approx(mcnemar([[0, 0], [2000, 0]]).pvalue, abs=1e-300)


p_values = st.floats(0, 1, allow_nan=False) | st.sampled_from([0.0, 0.01, 0.04, 0.05, 1.0])


@pytest.fixture(scope="module")
def frozen_heap() -> Iterator[None]:
    """statsmodels' multipletests runs a full `gc.collect()` on every call: over a test
    process's heap (Django, every test module) 0.1 to 0.6 s a call, a minute for the
    test's hundred examples. Objects made before the test are moved out of the collector's
    sight while this module's tests run (gc.freeze), so each collection sees only what the test made."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@EXAMPLES
@given(ps=st.lists(p_values, min_size=1, max_size=30))
def test_holm_is_statsmodels_multipletests(frozen_heap: None, ps: list[float]) -> None:
    theirs = multipletests(ps, method="holm")[1]
    assert holm(ps) == pytest.approx(list(theirs), rel=1e-12, abs=1e-15)


@EXAMPLES
@given(cells=st.tuples(*[st.integers(0, 60)] * 4))
def test_cohens_kappa_is_scikit_learns(cells: tuple[int, int, int, int]) -> None:
    table = Confusion(*cells)
    judge = ["pass"] * (table.pass_pass + table.pass_fail) + ["fail"] * (table.fail_pass + table.fail_fail)
    people = (["pass"] * table.pass_pass + ["fail"] * table.pass_fail + ["pass"] * table.fail_pass
              + ["fail"] * table.fail_fail)
    ours = cohen_kappa(table)
    if not table.total:
        assert ours is None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns where kappa is undefined (0/0)
        theirs = cohen_kappa_score(judge, people, labels=["pass", "fail"])
    if ours is None:
        assert math.isnan(theirs) or len(set(judge) | set(people)) == 1
    else:
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


@st.composite
def gradings(draw: st.DrawFn) -> list[tuple[int, int]]:
    """(passes, fails) per item, every item graded by the same number of people (the case
    statsmodels' Fleiss' kappa is defined for)."""
    raters = draw(st.integers(2, 7))
    items = draw(st.lists(st.integers(0, raters), min_size=1, max_size=40))
    return [(p, raters - p) for p in items]


@EXAMPLES
@given(items=gradings())
def test_fleiss_kappa_is_statsmodels(items: list[tuple[int, int]]) -> None:
    histogram: dict[tuple[int, int], int] = {}
    for item in items:
        histogram[item] = histogram.get(item, 0) + 1
    ours = fleiss_kappa((p, f, n) for (p, f), n in histogram.items())
    assert ours.items == len(items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = statsmodels_fleiss(np.array(items, dtype=float), method="fleiss")
    if ours.kappa is None:
        assert math.isnan(theirs) or len({p for p, _ in items}) == 1
    else:
        assert ours.kappa == pytest.approx(theirs, rel=1e-9, abs=1e-12)
