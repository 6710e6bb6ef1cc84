"""Online evaluation (issue 31): monitors that score received traces as they arrive, per
trace and per thread, on the task queue; their aggregates; retention of received traces."""
