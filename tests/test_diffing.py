"""Tool-call alignment and argument diffs (evaluations.evaluators.diffing): no database."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evaluations.evaluators.diffing import ArgDiff, ArgRule, ArgRules, align, child_path, diff_args
from evaluations.schemas.evalset import MatchType, ToolCall
from evaluations.schemas.outputs import OutputToolCall


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def did(name: str, **args: Any) -> OutputToolCall:
    return OutputToolCall(name=name, args=args)


def shape(alignment: Any) -> list[tuple[str, int | None, int | None]]:
    return [(row.kind, row.expected_index, row.actual_index) for row in alignment.rows]


FLIGHT = {"origin": "Oslo", "filters": {"dates": ["2026-05-01", "2026-05-03"], "cabin": "economy"}}


class TestWhenTheAgentDidWhatWasExpected:
    @pytest.mark.parametrize("match_type", list(MatchType))
    def test_every_call_is_matched_in_place(self, match_type: MatchType) -> None:
        expected = [call("search", q="x"), call("book", id=1)]
        actual = [did("search", q="x"), did("book", id=1)]
        alignment = align(expected, actual, match_type)
        assert shape(alignment) == [("matched", 0, 0), ("matched", 1, 1)]
        assert alignment.rows[1].expected is expected[1] and alignment.rows[1].actual is actual[1]
        assert (alignment.matched, alignment.complete, alignment.partial_score()) == (2, True, 1.0)

    def test_nothing_expected_and_nothing_called_is_complete(self) -> None:
        alignment = align([], [], MatchType.EXACT)
        assert (alignment.rows, alignment.complete, alignment.partial_score()) == ([], True, 1.0)


class TestExact:
    def test_an_extra_call_is_unexpected_and_costs_credit(self) -> None:
        alignment = align([call("a"), call("b")], [did("a"), did("x"), did("b")], MatchType.EXACT)
        assert shape(alignment) == [("matched", 0, 0), ("unexpected", None, 1), ("matched", 1, 2)]
        assert not alignment.complete
        assert alignment.partial_score() == pytest.approx(2 / 3)  # 2 matched of max(2, 3)

    def test_a_missing_call_costs_credit(self) -> None:
        alignment = align([call("a"), call("b"), call("c")], [did("a"), did("c")], MatchType.EXACT)
        assert shape(alignment) == [("matched", 0, 0), ("missing", 1, None), ("matched", 2, 1)]
        assert alignment.partial_score() == pytest.approx(2 / 3)

    def test_order_is_kept_so_a_swap_matches_only_one_call(self) -> None:
        alignment = align([call("a"), call("b")], [did("b"), did("a")], MatchType.EXACT)
        # Read forwards: the missing `a` comes before the `b` that matched, the stray `a` after.
        assert shape(alignment) == [("missing", 0, None), ("matched", 1, 0), ("unexpected", None, 1)]
        assert alignment.partial_score() == 0.5


class TestInOrder:
    def test_extra_calls_between_expected_ones_are_allowed(self) -> None:
        expected = [call("t1"), call("t2"), call("t3")]
        actual = [did("t1"), did("t1.1"), did("t2"), did("t2.1"), did("t3"), did("t3.1")]
        alignment = align(expected, actual, MatchType.IN_ORDER)
        assert alignment.complete and alignment.partial_score() == 1.0
        assert shape(alignment) == [("matched", 0, 0), ("unexpected", None, 1), ("matched", 1, 2),
                                    ("unexpected", None, 3), ("matched", 2, 4), ("unexpected", None, 5)]

    def test_a_missing_expected_call_is_not_complete(self) -> None:
        alignment = align([call("t1"), call("t2"), call("t4")], [did("t1"), did("t2"), did("t3")],
                          MatchType.IN_ORDER)
        assert not alignment.complete
        assert alignment.partial_score() == pytest.approx(2 / 3)  # over the expected calls only
        assert shape(alignment) == [("matched", 0, 0), ("matched", 1, 1), ("missing", 2, None),
                                    ("unexpected", None, 2)]

    def test_it_pairs_the_call_whose_args_match_over_an_earlier_one_with_the_same_name(self) -> None:
        alignment = align([call("search", q="x")], [did("search", q="y"), did("search", q="x")], MatchType.IN_ORDER)
        assert shape(alignment) == [("unexpected", None, 0), ("matched", 0, 1)]

    def test_one_full_match_outweighs_two_name_only_matches(self) -> None:
        expected = [call("a", x=1), call("b", x=1)]
        actual = [did("b", x=1), did("a", x=2), did("b", x=2)]
        alignment = align(expected, actual, MatchType.IN_ORDER)
        assert shape(alignment) == [("missing", 0, None), ("matched", 1, 0), ("unexpected", None, 1),
                                    ("unexpected", None, 2)]

    def test_a_name_match_with_other_args_is_paired_as_args_differ(self) -> None:
        alignment = align([call("a", x=1), call("b", x=1)], [did("a", x=1), did("b", x=2)], MatchType.IN_ORDER)
        assert shape(alignment) == [("matched", 0, 0), ("args_differ", 1, 1)]
        assert alignment.rows[1].arg_diffs == [ArgDiff("x", "changed", expected=1, actual=2)]
        assert alignment.partial_score() == 0.5


class TestAnyOrder:
    def test_order_does_not_matter(self) -> None:
        alignment = align([call("a"), call("b")], [did("b"), did("a")], MatchType.ANY_ORDER)
        assert shape(alignment) == [("matched", 0, 1), ("matched", 1, 0)]
        assert alignment.complete

    def test_unexpected_calls_come_last_and_do_not_cost_credit(self) -> None:
        alignment = align([call("a"), call("b")], [did("x"), did("b"), did("a")], MatchType.ANY_ORDER)
        assert shape(alignment) == [("matched", 0, 2), ("matched", 1, 1), ("unexpected", None, 0)]
        assert alignment.partial_score() == 1.0

    def test_it_finds_the_best_pairing_when_first_come_pairing_would_not(self) -> None:
        # Within 0.15, 1.0 fits both actual values and 1.2 only 1.1: pairing 1.0 with the first
        # actual call would leave 1.2 unmatched; the best matching pairs both.
        rules = ArgRules(overrides={"x": ArgRule(abs_tol=0.15)})
        alignment = align([call("f", x=1.0), call("f", x=1.2)], [did("f", x=1.1), did("f", x=1.0)],
                          MatchType.ANY_ORDER, rules)
        assert shape(alignment) == [("matched", 0, 1), ("matched", 1, 0)]

    def test_a_name_match_with_other_args_is_paired_after_full_matches(self) -> None:
        alignment = align([call("f", x=1), call("f", x=2)], [did("f", x=2), did("f", x=3)], MatchType.ANY_ORDER)
        assert shape(alignment) == [("args_differ", 0, 1), ("matched", 1, 0)]
        assert [d.as_dict() for d in alignment.rows[0].arg_diffs] == [
            {"path": "x", "kind": "changed", "expected": 1, "actual": 3}
        ]


class TestArgumentDiffs:
    def test_it_descends_into_nested_objects_and_lists(self) -> None:
        actual = {"origin": "Oslo", "filters": {"dates": ["2026-05-01", "2026-05-04"], "stops": 0}}
        assert diff_args(FLIGHT, actual) == [
            ArgDiff("filters.dates[1]", "changed", expected="2026-05-03", actual="2026-05-04"),
            ArgDiff("filters.cabin", "removed", expected="economy"),
            ArgDiff("filters.stops", "added", actual=0),
        ]

    def test_list_length_differences_are_added_or_removed_items(self) -> None:
        assert diff_args({"ids": [1, 2, 3]}, {"ids": [1]}) == [
            ArgDiff("ids[1]", "removed", expected=2), ArgDiff("ids[2]", "removed", expected=3)
        ]
        assert diff_args({"ids": [[1]]}, {"ids": [[1, 2]]}) == [ArgDiff("ids[0][1]", "added", actual=2)]

    def test_a_value_of_another_type_is_changed_as_a_whole(self) -> None:
        assert diff_args({"when": {"day": 1}}, {"when": "monday"}) == [
            ArgDiff("when", "changed", expected={"day": 1}, actual="monday")
        ]

    def test_keys_that_are_not_plain_names_are_quoted(self) -> None:
        assert child_path("", "first name") == '["first name"]'
        assert child_path("headers", "a.b") == 'headers["a.b"]'
        assert child_path("headers", "Content-Type") == "headers.Content-Type"
        assert child_path("items", 3) == "items[3]"

    def test_subset_allows_extra_actual_keys_at_any_depth_but_not_missing_ones(self) -> None:
        rules = ArgRules(mode="subset")
        assert diff_args({"filters": {"cabin": "economy"}}, {"filters": {"cabin": "economy", "stops": 0}, "n": 2},
                         rules) == []
        assert diff_args({"filters": {"cabin": "economy"}}, {"filters": {}}, rules) == [
            ArgDiff("filters.cabin", "removed", expected="economy")
        ]

    def test_ignore_mode_compares_names_only(self) -> None:
        alignment = align([call("a", x=1)], [did("a", x=2, y=3)], MatchType.EXACT, ArgRules(mode="ignore"))
        assert shape(alignment) == [("matched", 0, 0)]

    def test_an_unknown_args_mode_is_refused(self) -> None:
        with pytest.raises(ValueError, match="exact, subset or ignore"):
            ArgRules(mode="fuzzy")  # type: ignore[arg-type]


class TestOverrides:
    def test_an_ignored_path_and_everything_under_it_is_skipped(self) -> None:
        rules = ArgRules(overrides={"filters.dates": ArgRule(ignore=True), "trace_id": ArgRule(ignore=True)})
        actual = {"origin": "Oslo", "filters": {"dates": [], "cabin": "economy"}, "trace_id": "abc"}
        assert diff_args(FLIGHT, actual, rules) == []

    def test_a_regex_must_match_the_whole_actual_value(self) -> None:
        rules = ArgRules(overrides={"order_id": ArgRule(regex=r"ORD-\d{3}")})
        assert diff_args({"order_id": "ORD-000"}, {"order_id": "ORD-123"}, rules) == []
        assert diff_args({"order_id": "ORD-000"}, {"order_id": "ORD-1234"}, rules) == [
            ArgDiff("order_id", "changed", expected="ORD-000", actual="ORD-1234")
        ]

    def test_a_regex_can_reject_an_actual_value_equal_to_the_expected_one(self) -> None:
        # The expected value is a placeholder, not a pattern: equality proves nothing here.
        rules = ArgRules(overrides={"order_id": ArgRule(regex=r"ORD-\d+")})
        alignment = align([call("get", order_id="ORD-?")], [did("get", order_id="ORD-?")], MatchType.EXACT, rules)
        assert shape(alignment) == [("args_differ", 0, 0)]

    def test_numeric_tolerances_are_absolute_or_relative(self) -> None:
        absolute = ArgRules(overrides={"price": ArgRule(abs_tol=0.01)})
        relative = ArgRules(overrides={"price": ArgRule(rel_tol=0.1)})
        assert diff_args({"price": 10.0}, {"price": 10.005}, absolute) == []
        assert diff_args({"price": 10.0}, {"price": 10.5}, absolute) != []
        assert diff_args({"price": 10.0}, {"price": 10.9}, relative) == []
        assert diff_args({"price": 10.0}, {"price": 11.5}, relative) != []
        assert diff_args({"price": 10.0}, {"price": "10.0"}, relative) != []  # not a number

    def test_case_insensitive_compares_text_without_case(self) -> None:
        rules = ArgRules(overrides={"city": ArgRule(case_insensitive=True)})
        assert diff_args({"city": "Tokyo"}, {"city": "TOKYO"}, rules) == []
        assert diff_args({"city": "Tokyo"}, {"city": "Kyoto"}, rules) != []

    def test_a_rule_on_a_list_applies_to_its_items(self) -> None:
        rules = ArgRules(overrides={"cities": ArgRule(case_insensitive=True)})
        assert diff_args({"cities": ["Oslo", "Lima"]}, {"cities": ["OSLO", "lima"]}, rules) == []

    def test_a_wildcard_index_matches_every_item(self) -> None:
        rules = ArgRules(overrides={"legs[*].id": ArgRule(ignore=True)})
        expected = {"legs": [{"id": 1, "to": "Oslo"}, {"id": 2, "to": "Lima"}]}
        assert diff_args(expected, {"legs": [{"id": 7, "to": "Oslo"}, {"id": 8, "to": "Lima"}]}, rules) == []
        assert diff_args(expected, {"legs": [{"id": 7, "to": "Oslo"}, {"id": 8, "to": "Rome"}]}, rules) == [
            ArgDiff("legs[1].to", "changed", expected="Lima", actual="Rome")
        ]

    def test_a_tool_prefixed_rule_applies_to_that_tool_only(self) -> None:
        rules = ArgRules(overrides={"search:query": ArgRule(case_insensitive=True)})
        alignment = align([call("search", query="Oslo"), call("lookup", query="Oslo")],
                          [did("search", query="OSLO"), did("lookup", query="OSLO")], MatchType.EXACT, rules)
        assert [row.kind for row in alignment.rows] == ["matched", "args_differ"]

    def test_a_bad_pattern_is_refused_when_the_rules_are_made(self) -> None:
        with pytest.raises(re.error):
            ArgRules(overrides={"x": ArgRule(regex="(")})


class TestAsDict:
    def test_it_is_json_with_counts_rows_calls_and_diffs(self) -> None:
        expected = [call("search_flights", **FLIGHT), call("book", seat="12A")]
        actual = [OutputToolCall(name="search_flights", args={**FLIGHT, "origin": "Bergen"}, call_id="c1",
                                 result={"flights": 3})]
        data = align(expected, actual, MatchType.IN_ORDER).as_dict()
        assert json.loads(json.dumps(data)) == data
        assert data["match_type"] == "IN_ORDER"
        assert data["counts"] == {"matched": 0, "args_differ": 1, "missing": 1, "unexpected": 0}
        assert data["rows"][0] == {
            "kind": "args_differ", "expected_index": 0, "actual_index": 0,
            "expected": {"name": "search_flights", "args": FLIGHT},
            "actual": {"name": "search_flights", "args": {**FLIGHT, "origin": "Bergen"}, "call_id": "c1",
                       "result": {"flights": 3}},
            "arg_diffs": [{"path": "origin", "kind": "changed", "expected": "Oslo", "actual": "Bergen"}],
        }
        assert data["rows"][1] == {"kind": "missing", "expected_index": 1, "actual_index": None,
                                   "expected": {"name": "book", "args": {"seat": "12A"}}, "actual": None,
                                   "arg_diffs": []}

    def test_the_same_input_always_gives_the_same_rows(self) -> None:
        expected = [call("a", x=1), call("b"), call("a", x=2), call("c")]
        actual = [did("a", x=2), did("c"), did("a", x=1), did("b"), did("a", x=3)]
        for match_type in MatchType:
            first = align(expected, actual, match_type).as_dict()
            assert all(align(expected, actual, match_type).as_dict() == first for _ in range(5))


class TestOneCallLeftEachSide:
    """After the matching head and tail, one call each is left: the shortcut gives what the
    weighted LCS table gives (its rows, kinds, indices and diffs)."""

    @pytest.mark.parametrize("rules", [ArgRules(), ArgRules(mode="subset"),
                                       ArgRules(overrides={"city": ArgRule(case_insensitive=True)})])
    def test_the_shortcut_gives_the_tables_rows(self, rules: ArgRules) -> None:
        from evaluations.evaluators.diffing import _align_in_order, _lcs_rows

        calls = [call("a", city="Paris"), call("a", city="paris"), call("a", city="Lyon", day=1), call("b", city="Paris"),
                 call("a")]
        head, tail = call("start", n=1), call("end")
        checked = 0
        for e in calls:
            for a in calls:
                if e.name == a.name and rules.args_agree(e.name, e.args, a.args):
                    continue  # a match: the head takes it
                got = _align_in_order([head, e, tail], [head, a, tail], rules)
                table = _lcs_rows([e], [a], rules, 1)
                assert [r.as_dict() for r in got[1:-1]] == [r.as_dict() for r in table]
                assert [r.kind for r in (got[0], got[-1])] == ["matched", "matched"]
                checked += 1
        assert checked >= 15
