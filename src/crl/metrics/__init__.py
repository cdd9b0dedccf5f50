"""Metrics: retrieval quality (``crl.metrics.retrieval``) and risk estimates (``crl.metrics.risk``).

Import the submodules directly; this package file stays empty so that importing one metric module never
pulls in the others.
"""
