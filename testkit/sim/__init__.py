"""Simulated scrape targets: a GPU cluster's exporters and a training fleet's, served on loopback."""
