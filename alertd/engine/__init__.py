"""The pure part: classify, correlate and run incident lifecycles over data and a clock."""
