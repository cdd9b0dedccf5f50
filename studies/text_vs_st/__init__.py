"""crl's text fine-tuning step beside sentence-transformers' MultipleNegativesRankingLoss: one batch sequence, two arms.

    python -m studies.text_vs_st configs/wordnet_minilm.toml --out runs/text_vs_st/wordnet
    python -m studies.text_vs_st configs/wordnet_minilm.toml --extra gradcache --chunk 32 \\
        --set data.batch_size=512 --out runs/text_vs_st/wordnet-gradcache
    python -m studies.text_vs_st configs/wordnet_minilm.toml --extra hard-negatives --negatives 3 --prefill

What it measures. Two copies of the same pretrained MiniLM ([model] path; '' is the packaged all-MiniLM-L6-v2)
are fine-tuned on the same batches and scored on the same held-out split:

- **crl**: crl's own step, as ``crl train`` takes it for the config (:class:`crl.train.loop.TrainingLoop`: the
  config's loss, negatives, false-negative mask, GradCache, AdamW, schedule and clipping);
- **st**: sentence-transformers' loss (:func:`st_loss`) on a ``SentenceTransformer`` of the same folder, called
  from a plain torch loop (ST's Trainer needs ``accelerate`` and ``datasets``, which the project does not install).

Reported for each arm: nDCG@10, recall@10 and MRR@10 of the held-out split (``--split validation``, the default;
the test split only with ``--allow-test``), ranked and scored by ``crl eval``'s code (both arms' final weights go
into crl's encoder, :func:`crl.train.heldout_monitor.text_embedders` and
:func:`crl.metrics.text_retrieval.evaluate_retrieval`, formulas in :mod:`crl.metrics.ir`); the paired bootstrap
95% interval of crl - st for each metric (:func:`crl.metrics.text_retrieval.compare_reports`: delta = (1/Q)
sum_q (crl_q - st_q), 10,000 resamples of the Q queries); seconds per step (median and mean; a step includes
tokenising its batch, in both arms); memory. Each arm runs in a fresh subprocess (``--arm``), so that its
memory is its own: peak resident set size (VmHWM) and its growth over the resident set just before the first
step (AdamW state, gradients and activations; the model and data are loaded before); on CUDA also torch's peak
allocated bytes. The intervals resample queries for one training run of each arm, so they leave out run-to-run
variation (``--set run.seed=...`` repeats the comparison with other batches and dropout masks). The crl arm runs
first; the st arm takes exactly as many steps as the crl arm took (``--minutes`` stops the crl arm early; the
schedule is still that of ``--steps``).

Matched between the arms:

- the batches: ONE sequence B_1..B_T of ``[data] batch_size`` pair indices from crl's data pipeline (the
  :class:`crl.train.cursor.DataCursor` of ``[run] seed``'s "order" stream: a fresh permutation of the n training
  pairs each epoch, cut into consecutive batches, the incomplete last one dropped), written to ``batches.npy``.
  The st arm reads it; the crl arm draws its own and records them; the sha256 of each arm's batches must equal
  that of the file (:func:`sequence_hash`), or the run stops;
- optimiser and schedule: crl's :func:`crl.train.build.build_optimizer` (AdamW, weight decay on matrices only)
  and :class:`crl.train.build.WarmupCosine` (f(t) = (t + 1)/W for t < W, then a cosine to ``min_lr_ratio``) on
  each arm's parameters; the same lr, warm-up W, total steps T and gradient-norm clip;
- the loss: scale = 1/tau; s_ij = cos(f(x_i), f(y_j)) (one shared tower, unit-norm mean pooling);
  one-sided L = (1/n) sum_i [log sum_j exp(s_ij / tau) - s_ii / tau] is MNRL's default; ``[loss] symmetric =
  true`` (the shipped configs) is crl's (L_xy + L_yx) / 2, which MNRL computes with ``directions =
  ("query_to_doc", "doc_to_query")`` and ``partition_mode = "per_direction"`` (what the deprecated
  MultipleNegativesSymmetricRankingLoss is); ``tests/train/test_text_vs_st.py`` checks both equalities and
  their gradients on the same embeddings;
- dropout: ``torch.manual_seed([run] seed)`` just before the first step in each arm; threads, device, precision.

Not matched (each library's own behaviour, kept on purpose): crl leaves false negatives out of an anchor's
negatives (pairs linked by an identical query or positive text share an item id), MNRL scores them as negatives
(the result counts the batches where this happens); ST embeds the two columns in one forward pass padded to the
longer one, crl in two.

Extras (``--extra``; the config is changed by ``--set`` strings, printed and saved):

- ``gradcache``: crl with ``[optim] chunk_size = --chunk`` against ST's CachedMultipleNegativesRankingLoss with
  ``mini_batch_size = --chunk`` (choose a large ``--set data.batch_size``);
- ``hard-negatives``: crl's mined hard negatives (``[loss] negatives = "mined"``, m = ``--negatives`` per anchor,
  one-sided, false negatives masked; ``--prefill`` starts the memory bank from the zero-shot embeddings of the pool
  as studies/text_retrieval.py does, otherwise it fills during training as in ``crl train``). ST's own miner,
  ``sentence_transformers.util.mine_hard_negatives``, needs the ``datasets`` package (it takes and returns a
  ``datasets.Dataset`` and raises ImportError without it), which the project does not install, so it is not run
  here: the st arm gets the very negatives crl's sampler drew at each step (recorded), as the extra columns of an
  (anchor, positive, negative_1..m) n-tuple, the way an ST user passes mined negatives to MNRL;
- ``scrl``: crl's SCRL negatives (``[loss] negatives = "independent_pool"``: m = ``--negatives`` uniform pool
  draws per anchor, one-sided) against MNRL given the same drawn negatives as n-tuple columns. ST has no
  per-anchor regime: MNRL scores every anchor against all positives and all negatives of the batch, while crl's
  SCRL loss scores anchor i against its own m only.

Output: ``--out``/result.json (every figure, both arms' per-query values, the command line) beside the arms' own
files, and a table.
"""
