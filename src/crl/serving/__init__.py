"""Trained models put to use: held-out evaluation, indexes built from checkpoints or texts, the HTTP service.

- :mod:`crl.serving.evaluate`: :func:`evaluate_checkpoint` (``crl eval``) and :func:`embed_array` (``crl embed``);
- :mod:`crl.serving.encoded`: :func:`build_from_checkpoint` (``crl index build``);
- :mod:`crl.serving.queries`: queries by item id or string (:func:`query_vectors`), the registry of string
  encoders, the query item left out of its own results (``crl search``; numpy and faiss only, no torch);
- :mod:`crl.serving.text`: :func:`text_index` of texts embedded by MiniLM and the string encoder of such an index;
- :mod:`crl.serving.service`: :func:`create_app`, the FastAPI search service (``crl serve``).

The faiss :class:`crl.search.Index` these build on lives in the bottom room :mod:`crl.search`.
"""
