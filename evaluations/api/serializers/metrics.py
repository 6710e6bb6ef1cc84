"""watsonx-style metric results: records, aggregates and the wide table."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.api.serializers.runs import LEVELS, RESULT_STATUSES


class ThresholdSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=[("lower_limit", "lower_limit"), ("upper_limit", "upper_limit")])
    value = serializers.FloatField(allow_null=True)


class MetricErrorSerializer(serializers.Serializer):
    message = serializers.CharField()


class MetricRecordSerializer(serializers.Serializer):
    """One metric value at the level it applies to (watsonx `AgentMetricResult`)."""

    id = serializers.CharField()
    name = serializers.CharField(help_text="the metric (criterion)")
    value = serializers.FloatField(allow_null=True, help_text="the score in [0, 1]")
    applies_to = serializers.ChoiceField(choices=LEVELS)
    conversation_id = serializers.CharField(help_text="`<eval_id>#<iteration>`")
    interaction_id = serializers.CharField(allow_null=True, required=False,
                                           help_text="`<conversation_id>/turn<n>` for interaction scores")
    node_name = serializers.CharField(allow_null=True, required=False)
    group = serializers.CharField(allow_null=True, required=False, help_text="the metric group")
    thresholds = ThresholdSerializer(many=True)
    errors = MetricErrorSerializer(many=True)
    passed = serializers.BooleanField(allow_null=True)
    raw_value = serializers.FloatField(allow_null=True, help_text="on the evaluator's own scale (e.g. seconds)")
    result = serializers.IntegerField(help_text="the case result's id")
    eval_id = serializers.CharField()
    iteration = serializers.IntegerField()


class AggregateMetricSerializer(serializers.Serializer):
    """A metric aggregated over a run per level and node (watsonx `AggregateAgentMetricResult`)."""

    name = serializers.CharField()
    applies_to = serializers.ChoiceField(choices=LEVELS)
    node_name = serializers.CharField(allow_null=True)
    group = serializers.CharField(allow_null=True)
    value = serializers.FloatField(allow_null=True, help_text="the mean")
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    passed = serializers.IntegerField()
    judged = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    errors = serializers.IntegerField(help_text="scores whose evaluator reported an error")
    raw_mean = serializers.FloatField(allow_null=True, help_text="of the raw values (e.g. seconds)")
    raw_min = serializers.FloatField(allow_null=True)
    raw_max = serializers.FloatField(allow_null=True)
    individual_results = MetricRecordSerializer(
        many=True, required=False,
        help_text="with include_individual: the first individual_limit results (all of them: "
                  "GET .../metrics/results/?name=&level=&node=)")


class MetricQuery(serializers.Serializer):
    level = serializers.MultipleChoiceField(
        choices=LEVELS, required=False,
        help_text="conversation, interaction and/or node (repeat or comma-separate); default: all")
    applies_to = serializers.MultipleChoiceField(choices=LEVELS, required=False, help_text="alias of `level`")
    node = serializers.CharField(required=False, max_length=200, help_text="only this node's results")
    name = serializers.CharField(required=False, max_length=100, help_text="only this metric")


class AggregateMetricQuery(MetricQuery):
    include_individual = serializers.BooleanField(required=False, default=False)
    individual_limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000,
                                                help_text="individual results per metric, at most")


class MetricRecordQuery(MetricQuery):
    passed = serializers.BooleanField(required=False, allow_null=True, default=None)


class WideRowSerializer(serializers.Serializer):
    result = serializers.IntegerField(help_text="the case result's id")
    eval_id = serializers.CharField()
    iteration = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RESULT_STATUSES)
    latency_seconds = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                    help_text="criterion -> conversation-level score (null: not scored)")
    passed = serializers.DictField(child=serializers.BooleanField(allow_null=True),
                                   help_text="criterion -> verdict (null: no verdict)")


class WideTableSerializer(serializers.Serializer):
    columns = serializers.ListField(child=serializers.CharField(),
                                    help_text="the CSV export's columns (results.csv), in order")
    metrics = serializers.ListField(child=serializers.CharField(), help_text="the run's criteria, in order")
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = WideRowSerializer(many=True)
