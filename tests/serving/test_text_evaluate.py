"""``crl eval`` on a text run: the test split (or your files) ranked by the fine-tuned and the zero-shot model,
their paired difference, the JSON and the TREC run; bad input is one line.

If these fail, a fine-tuned text model cannot be compared with the model it started from, the comparison is not
paired on the same queries, the TREC run disagrees with the reported figures, or a bad file gives a traceback.
"""

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from crl.commands import app
from crl.commands._errors import EXIT_USAGE
from crl.metrics.ir import DEFAULT_KS, DEFINITIONS, ir_metrics_from_ranking
from crl.metrics.text_retrieval import evaluate_retrieval
from crl.metrics.trec import read_run
from crl.models import MiniLM, embed_texts
from crl.serving.evaluate import evaluate_checkpoint
from crl.serving.text_evaluate import TextEvalResult, evaluate_text_state
from crl.serving.trained import model_of_state, starting_model
from crl.train.build import Streams
from crl.train.checkpoint import load_train_state
from crl.train.config import TextData, TrainConfig
from crl.train.data import text_source, text_task
from crl.train.loop import TrainingLoop
from crl.train.trainer import RunResult
from studies import text_retrieval as text_retrieval_study
from tests.train.helpers import fit, tiny_config, tiny_text_config


@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainConfig, RunResult]:
    """A bag-of-tokens text run of 4 steps on 48 pairs (tests/train/helpers.tiny_text_config)."""
    config = tiny_text_config(tmp_path_factory.mktemp("text"), "tiny_text")
    return config, fit(config)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["eval", *args])
    return result.exit_code, result.output


def test_crl_eval_of_a_text_run_writes_its_json_and_a_trec_run_of_the_same_figures(
    text_run: tuple[TrainConfig, RunResult],
) -> None:
    config, result = text_run
    code, output = _invoke(str(result.run_dir))
    assert code == 0, output
    for needle in ("ndcg@10", "recall@10", "map@", "fine-tuned - zero-shot [95% CI]", "TREC run:"):
        assert needle in output
    written = json.loads((result.run_dir / "eval.json").read_text())
    assert isinstance(config.data, TextData)
    task = text_task(config.data, "test")
    assert (written["n_queries"], written["n_documents"]) == (len(task.queries), len(task.corpus))
    assert written["task"] == "the test split of [data] source = 'text_pairs'"
    assert (
        set(written["fine_tuned"]) == set(written["zero_shot"]) == set(written["fine_tuned_minus_zero_shot"])
    )
    run = read_run(result.run_dir / "eval.trec")
    assert set(run) == set(task.query_ids)
    qrels = {q: {task.doc_ids[d] for d in r} for q, r in zip(task.query_ids, task.relevant, strict=True)}
    again = ir_metrics_from_ranking(run, qrels, ks={"ndcg": (10,), "recall": (10,), "mrr": (10,)})
    for name, value in again.as_flat_dict().items():
        assert value == pytest.approx(written["fine_tuned"][name], abs=1e-12), name


def test_a_run_that_did_not_move_differs_from_its_starting_model_by_exactly_zero(tmp_path: Path) -> None:
    """lr = 1e-30 leaves every float32 weight as it was: the zero-shot model must be that starting model, so
    every per-query difference is 0 on the same queries and every interval is [0, 0]."""
    config = tiny_text_config(tmp_path, "still", optim={"lr": 1e-30, "weight_decay": 0.0})
    state = load_train_state(fit(config).checkpoint)
    cpu = torch.device("cpu")
    trained, start = model_of_state(state, cpu).state_dict(), starting_model(state, cpu).state_dict()
    assert all(torch.equal(trained[name], start[name]) for name in trained)
    result = evaluate_checkpoint(config.run_dir, device="cpu")
    assert isinstance(result, TextEvalResult)
    assert result.fine_tuned.report.as_flat_dict() == result.zero_shot.report.as_flat_dict()
    for difference in result.differences.values():
        assert (difference.delta, difference.low, difference.high) == (0.0, 0.0, 0.0)
        assert difference.n_queries == len(result.task.queries)


def _own_files(folder: Path) -> list[str]:
    """--queries, --corpus and --qrels of a 3-query task (BEIR JSONL, TREC qrels), as command-line arguments."""
    queries = {"first": "a large dog", "second": "a quiet river", "third": "an old song"}
    corpus = {
        "D1": "dog that is large",
        "D2": "river that is quiet",
        "D3": "song that is old",
        "D4": "a ship",
    }
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in corpus.items())
    )
    (folder / "qrels.txt").write_text("first 0 D1 1\nsecond 0 D2 1\nthird 0 D3 1\n")
    return ["--queries", str(folder / "queries.jsonl"), "--corpus", str(folder / "corpus.jsonl"),
            "--qrels", str(folder / "qrels.txt")]  # fmt: skip


def test_crl_eval_ranks_your_own_queries_corpus_and_qrels(
    text_run: tuple[TrainConfig, RunResult], tmp_path: Path
) -> None:
    _, result = text_run
    out, trec = tmp_path / "mine.json", tmp_path / "mine.trec"
    code, output = _invoke(
        str(result.run_dir), *_own_files(tmp_path), "--out", str(out), "--trec-run", str(trec)
    )
    assert code == 0, output
    written = json.loads(out.read_text())
    assert (written["n_queries"], written["n_documents"]) == (3, 4)
    assert written["task"].startswith("--queries ") and "map@4" in written["fine_tuned"]
    assert written["relevance"] == "binary" and written["definitions"] == dict.fromkeys(
        DEFAULT_KS, DEFINITIONS[False]["ndcg"]
    )
    assert "binary qrels: sentence-transformers' InformationRetrievalEvaluator" in " ".join(output.split())
    run = read_run(trec)
    assert list(run) == ["first", "second", "third"]
    assert all(sorted(doc for doc, _ in hits) == ["D1", "D2", "D3", "D4"] for hits in run.values())


def test_crl_eval_of_graded_qrels_gives_pytrec_evals_figures_of_its_own_trec_run(
    text_run: tuple[TrainConfig, RunResult], tmp_path: Path
) -> None:
    """BEIR-style grades (2 and 1, a judged 0): eval.json says the qrels are graded, and its nDCG and MAP are
    pytrec_eval's (trec_eval's linear gain, MAP over R_q) of the TREC run it wrote: if this fails, a user's
    nDCG@10 on graded qrels is not the number BEIR and MTEB publish."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    _, result = text_run
    files = _own_files(tmp_path)
    judged = {"first": {"D1": 2, "D4": 1}, "second": {"D2": 1, "D3": 0}, "third": {"D3": 2, "D2": 1}}
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in judged.items() for d, g in docs.items())
    )
    out, trec = tmp_path / "graded.json", tmp_path / "graded.trec"
    code, output = _invoke(str(result.run_dir), *files, "--out", str(out), "--trec-run", str(trec))
    assert code == 0, output
    written = json.loads(out.read_text())
    assert written["relevance"] == "graded" and "ndcg_cut" in written["definitions"]["ndcg"]
    run = {query: dict(hits) for query, hits in read_run(trec).items()}
    expected = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.4", "map_cut.4"}).evaluate(run)
    for name, measure in (("ndcg@4", "ndcg_cut_4"), ("map@4", "map_cut_4")):
        value = sum(by_query[measure] for by_query in expected.values()) / len(expected)
        assert written["fine_tuned"][name] == pytest.approx(value, abs=1e-6), name


def test_crl_eval_says_how_much_of_a_long_document_it_cut(
    text_run: tuple[TrainConfig, RunResult], tmp_path: Path
) -> None:
    """A corpus document beyond the run's max_seq_length (12 word pieces here) was once cut without a word: crl
    eval names how many documents were cut, and the one that lost most by its id; the queries, all short, get no
    line."""
    _, result = text_run
    files = _own_files(tmp_path)
    corpus = tmp_path / "corpus.jsonl"
    lines = corpus.read_text().splitlines()
    lines[3] = json.dumps({"_id": "D4", "text": "a ship that sails the sea " * 20})
    corpus.write_text("\n".join(lines) + "\n")
    done = CliRunner().invoke(app, ["eval", str(result.run_dir), *files, "--out", str(tmp_path / "e.json")])
    assert done.exit_code == 0, done.output
    notes = [line for line in done.stderr.splitlines() if "word pieces" in line]
    assert len(notes) == 1 and notes[0].startswith(
        "crl: documents: 1 of 4 texts are longer than 12 word pieces"
    )
    assert notes[0].endswith("from 'D4' ([data] max_seq_length)"), notes


def _assert_one_line(code: int, output: str, *needles: str) -> None:
    assert code == EXIT_USAGE, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    for needle in needles:
        assert needle in output, output


def test_bad_text_eval_input_is_one_line(text_run: tuple[TrainConfig, RunResult], tmp_path: Path) -> None:
    _, result = text_run
    run, files = str(result.run_dir), _own_files(tmp_path)
    _assert_one_line(*_invoke(run, *files[:2]), "--corpus and --qrels missing")
    (tmp_path / "qrels.txt").write_text("first 0 D9 1\n")
    _assert_one_line(*_invoke(run, *files), "document id 'D9'", "not in the corpus file")
    (tmp_path / "qrels.txt").write_text("first 0 D1 0\n")
    _assert_one_line(*_invoke(run, *files), "no query of the queries file", "relevance > 0")
    (tmp_path / "qrels.txt").write_text("first 0 D1 1\n")
    _assert_one_line(*_invoke(run, *files), "holds 1 query", "at least 2")
    _assert_one_line(
        *_invoke(run, *files[:4], "--qrels", str(tmp_path / "none.txt")), "none.txt", "does not exist"
    )


def test_text_options_are_refused_for_a_run_of_pairs(tmp_path: Path) -> None:
    result = fit(tiny_config(tmp_path, "pairs", optim={"total_steps": 2, "warmup_steps": 1}))
    code, output = _invoke(str(result.run_dir), "--trec-run", str(tmp_path / "x.trec"))
    _assert_one_line(code, output, "--trec-run: only a text run takes these", "source = 'digits'")


def test_the_zero_shot_model_of_a_minilm_run_is_the_packaged_all_minilm_l6_v2(tmp_path: Path) -> None:
    """One MiniLM step in memory (no checkpoint written): the zero-shot column ranks the test split as the
    packaged model does through crl.models.embed_texts (which equals SentenceTransformer.encode)."""
    minilm = {"encoder": "minilm", "embedding_dim": 384}
    config = tiny_text_config(
        tmp_path, "minilm", model=minilm, data={"batch_size": 4}, optim={"total_steps": 1}
    )
    assert isinstance(config.data, TextData)
    loop = TrainingLoop(config, text_source(config.data), Streams.derive(config.run.seed))
    loop.train_step()
    result = evaluate_text_state(loop.state(), tmp_path / "in-memory", torch.device("cpu"))
    packaged = MiniLM()

    def encode(texts: Sequence[str]) -> torch.Tensor:
        return embed_texts(texts, model=packaged, max_seq_length=config.data.max_seq_length)

    expected = evaluate_retrieval(result.task, encode, encode, ks=DEFAULT_KS).report
    assert result.zero_shot.report.as_flat_dict() == pytest.approx(expected.as_flat_dict(), abs=1e-12)
    assert result.task == text_task(config.data, "test")


def test_the_benchmark_evaluates_a_run_with_crl_evals_code(
    text_run: tuple[TrainConfig, RunResult], tmp_path: Path
) -> None:
    """python -m studies.text_retrieval --run RUN_DIR on the whole test split gives crl eval's figures."""
    _, result = text_run
    text_retrieval_study.main(
        ["--run", str(result.run_dir), "--queries", "0", "--corpus", "0", "--out", str(tmp_path)]
    )
    written = json.loads((tmp_path / "tiny_text-eval.json").read_text())
    code, output = _invoke(str(result.run_dir), "--out", str(tmp_path / "eval.json"))
    assert code == 0, output
    expected = json.loads((tmp_path / "eval.json").read_text())
    for key in ("n_queries", "n_documents", "fine_tuned", "zero_shot", "fine_tuned_minus_zero_shot"):
        assert written[key] == expected[key], key


def test_crl_eval_of_a_text_run_says_each_stage_on_stderr(
    text_run: tuple[TrainConfig, RunResult], tmp_path: Path
) -> None:
    """Off a terminal crl eval writes one line per stage on stderr (each model's documents and queries, the
    bootstrap; and importing torch first, in a process that has not) and none on stdout: if this fails, a text
    eval whose output goes to a file sits silent for minutes (156 s once), or its stages pollute its output."""
    _, result = text_run
    done = CliRunner().invoke(app, ["eval", str(result.run_dir), "--out", str(tmp_path / "e.json")])
    assert done.exit_code == 0, done.output
    task = text_task(text_run[0].data, "test")  # type: ignore[arg-type]
    queries, documents = f"({len(task.queries):,})", f"({len(task.corpus):,})"
    assert done.stderr.splitlines() == [
        f"crl: loading the fine-tuned model of step {result.step}",
        f"crl: fine-tuned: embedding the documents {documents}",
        f"crl: fine-tuned: embedding the queries {queries}",
        "crl: loading the zero-shot model the run started from",
        f"crl: zero-shot: embedding the documents {documents}",
        f"crl: zero-shot: embedding the queries {queries}",
        "crl: paired bootstrap intervals (10,000 resamples)",
    ]
    assert "crl:" not in done.stdout
