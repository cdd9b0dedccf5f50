"""Quality studies, apart from the speed and memory tables of ``benchmarks/``: each trains or scores something and
states what it found, some against a registered criterion. Run each from the repository's root as a module:

- ``python -m studies.text_vs_st CONFIG``: crl's text fine-tuning step beside sentence-transformers' MNRL on one
  batch sequence (a package by role: the plan both arms read, the arms, the report);
- ``python -m studies.text_retrieval CONFIG``: a text fine-tune scored against zero-shot MiniLM with paired
  bootstrap intervals;
- ``python -m studies.ir_ties``: exact class retrieval when scores tie, the dense ranking of a flat index against
  the widening search.
"""
