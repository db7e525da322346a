"""Several alertd processes over one store: the engine lease, forwarded actions, reconciliation."""
