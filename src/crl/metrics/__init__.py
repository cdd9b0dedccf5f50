"""Metrics of retrieval quality: retrieval over held-out pairs (``crl.metrics.retrieval``; over an index,
``crl.metrics.ir``; of text retrieval tasks, ``crl.metrics.text_retrieval``) and class accuracy of frozen
embeddings (kNN, linear probe: ``crl.metrics.classification``). The theory's population risks, AUC and kernels
live in their own room, ``crl.risk``.

Import the submodules directly; this package file stays empty so that importing one metric module never
pulls in the others.
"""
