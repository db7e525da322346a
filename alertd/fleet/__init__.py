"""Fleet views over incident history: GPU identity, rankings, RMA candidates."""
