"""Remediation: cordon, drain or hand off the nodes an incident names, after a human's approval, guarded.

``model`` (the stored remediation and its states) and ``decide`` (proposals, the circuit breaker, approvals)
and ``blast`` (who a drain hurts) are pure; ``kube`` talks to the Kubernetes API.
"""
