"""The fleet reliability report: incident facts and fleet samples -> yield, failures, MTTR, lemons, cordons.

facts (one incident -> what the report counts), compute (the figures, pure), rollup (keeps the facts in the
store ahead of retention), build (the report for an API request), table (CSV), digest (the weekly Slack post),
metrics (Prometheus gauges). docs/reliability-report.md defines every figure.
"""
