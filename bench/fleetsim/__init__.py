"""A scored simulation of a GPU fleet as alertd would hear about it.

Faults are state over time (``faults``), the shipped Prometheus rules are
evaluated over that state (``predicates``, ``prometheus``), Alertmanager's
dispatcher turns the alerts into webhooks (``alertmanager``), ``alertd replay``
folds them into incidents and pages, and ``score`` compares the result with
the ground truth. ``python -m bench.fleetsim --help``; docs/fleet-simulation.md.
"""
