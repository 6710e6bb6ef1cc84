"""Notifications (issue 32): rules that fire on what happens in a project, messages grouped per
rule, and their delivery to channels (signed webhooks, Slack, e-mail, the in-app list) from the
task queue, at least once, with a log. See docs/notifications.md.

- `rules`: what fires a rule (matching, the monitor check, cooldown and grouping into messages);
- `payloads`: what a message says (the JSON every channel renders from);
- `channels`: how each kind of channel sends one message;
- `delivery`: the delivery rows, their leases, retries, backoff and pausing;
- `events`: the entry points (the activity feed, a monitor's scoring, the digests, the sweep);
- `services`: rules and channels made, changed and removed by people (validated, audited).
"""
