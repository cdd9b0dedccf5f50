"""Metrics: retrieval quality (``crl.metrics.retrieval``; over an index, ``crl.metrics.ir``; of text retrieval
tasks, ``crl.metrics.text_retrieval``), class accuracy of frozen embeddings (kNN, linear probe:
``crl.metrics.classification``) and risk estimates (``crl.metrics.risk``).

Import the submodules directly; this package file stays empty so that importing one metric module never
pulls in the others.
"""
