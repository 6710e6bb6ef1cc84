"""The agreement statistics of judge calibration against values computed by hand (no
database): Cohen's kappa, Fleiss' kappa and how graded items become a confusion matrix."""

from __future__ import annotations

import pytest

from evaluations.review.agreement import Confusion, calibrate, cohen_kappa, fleiss_kappa, majority


def test_cohen_kappa_of_the_textbook_table() -> None:
    # 50 proposals, two readers (the example of Wikipedia's "Cohen's kappa"): yes/yes 20, yes/no 5,
    # no/yes 10, no/no 15. p_o = 35/50 = 0.7; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.4.
    table = Confusion(pass_pass=20, pass_fail=5, fail_pass=10, fail_fail=15)
    assert table.accuracy == pytest.approx(0.7)
    assert cohen_kappa(table) == pytest.approx(0.4)
    assert table.kappa == pytest.approx(0.4)


def test_cohen_kappa_of_a_second_hand_computed_table() -> None:
    # judge pass 45 / fail 55, people pass 40 / fail 60 over 100: pp 30, pf 15, fp 10, ff 45.
    # p_o = 0.75; p_e = 0.45 * 0.40 + 0.55 * 0.60 = 0.18 + 0.33 = 0.51; kappa = 0.24 / 0.49.
    table = Confusion(pass_pass=30, pass_fail=15, fail_pass=10, fail_fail=45)
    assert table.kappa == pytest.approx(0.24 / 0.49)
    assert table.agreed == 75 and table.disagreed == 25 and table.total == 100


def test_cohen_kappa_at_the_edges() -> None:
    assert Confusion(pass_pass=7, fail_fail=3).kappa == pytest.approx(1.0)
    # never agree: p_o = 0; judge pass 0.4, people pass 0.6: p_e = 0.24 + 0.24 = 0.48
    assert Confusion(pass_fail=4, fail_pass=6).kappa == pytest.approx(-0.48 / 0.52)
    assert Confusion(pass_pass=5).kappa is None  # everyone always said pass: p_e = 1
    assert Confusion().kappa is None and Confusion().accuracy is None


def test_fleiss_kappa_of_a_hand_computed_table() -> None:
    # Four items, three graders each: (3 pass, 0 fail), (2, 1), (0, 3), (1, 2).
    # P_i = 1, 1/3, 1, 1/3 -> mean 2/3; p_pass = 6/12; P_e = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3.
    result = fleiss_kappa([(3, 0, 1), (2, 1, 1), (0, 3, 1), (1, 2, 1)])
    assert result.items == 4 and result.ratings == 12
    assert result.observed == pytest.approx(2 / 3)
    assert result.kappa == pytest.approx(1 / 3)
    # the same items given as a histogram with counts
    assert fleiss_kappa([(3, 0, 2), (2, 1, 2), (0, 3, 2), (1, 2, 2)]).kappa == pytest.approx(1 / 3)


def test_fleiss_kappa_with_two_graders_is_scotts_pi() -> None:
    # Two graders per item: Fleiss' kappa equals Scott's pi, p_e from the pooled proportions.
    # Items: agree pass 20, agree fail 15, split 15 (5 + 10 from a table like Cohen's example).
    # p_o = 35/50; pooled pass = (2*20 + 15) / 100 = 0.55; p_e = 0.55^2 + 0.45^2 = 0.505;
    # pi = (0.7 - 0.505) / 0.495.
    result = fleiss_kappa([(2, 0, 20), (0, 2, 15), (1, 1, 15)])
    assert result.kappa == pytest.approx((0.7 - 0.505) / 0.495)


def test_fleiss_kappa_with_different_numbers_of_graders() -> None:
    # (2, 0): P = 1; (1, 2): P = (1 + 4 - 3) / 6 = 1/3; (0, 4): P = 1; one grade alone is left out.
    # mean P = 7/9; passes 3 of 9 ratings: P_e = 1/9 + 4/9 = 5/9; kappa = (7/9 - 5/9) / (4/9) = 1/2.
    result = fleiss_kappa([(2, 0, 1), (1, 2, 1), (0, 4, 1), (1, 0, 3)])
    assert result.items == 3 and result.ratings == 9
    assert result.kappa == pytest.approx(0.5)
    assert fleiss_kappa([(1, 0, 5)]).kappa is None and fleiss_kappa([]).items == 0
    assert fleiss_kappa([(2, 0, 3)]).kappa is None  # all agree on pass: agreement beyond chance undefined


def test_calibrate_sets_the_judge_against_the_majority_and_leaves_ties_out() -> None:
    rows = [
        (True, 2, 2, 4),  # judge pass, both people pass: 4 items
        (True, 0, 1, 1),  # judge pass, one person fails
        (False, 1, 2, 2),  # tie: left out
        (False, 0, 3, 3),  # judge fail, three people fail
        (False, 2, 3, 1),  # judge fail, majority pass
    ]
    c = calibrate(rows)
    assert c.items == 11 and c.ties == 2
    m = c.confusion
    assert (m.pass_pass, m.pass_fail, m.fail_pass, m.fail_fail) == (4, 1, 1, 3)
    assert m.accuracy == pytest.approx(7 / 9)
    # graders: (2,0) x4, (1,1) x2, (0,3) x3, (2,1) x1 -> P = 4*1 + 2*0 + 3*1 + 1/3 = 22/3 over 10 items
    assert c.graders.items == 10
    assert c.graders.observed == pytest.approx(22 / 30)


def test_majority() -> None:
    assert majority(2, 1) is True and majority(1, 2) is False and majority(1, 1) is None
