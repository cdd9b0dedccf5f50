"""``python -m studies.text_vs_st CONFIG ...``: the command line of the study (and of each arm's own process)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import studies.text_vs_st as study
from crl.train.config import ConfigError
from studies.arguments import OneLineParser, at_least, positive_float
from studies.text_vs_st.arms import crl_arm, fail, st_arm
from studies.text_vs_st.plan import ARMS, EXTRAS, RESULT, SPLITS, Plan
from studies.text_vs_st.report import compare, table


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; bad input exits with one line naming the argument."""
    parser = OneLineParser(
        prog="python -m studies.text_vs_st",
        description=study.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config", type=Path, nargs="?", help="A text config, e.g. configs/wordnet_minilm.toml."
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A config override, as crl train --set.",
    )
    parser.add_argument("--steps", type=at_least(1), help="Optimiser steps T (default [optim] total_steps).")
    parser.add_argument("--minutes", type=positive_float, help="Stop the crl arm after this wall time.")
    parser.add_argument(
        "--split", choices=tuple(SPLITS), default="validation", help="The held-out split scored."
    )
    parser.add_argument(
        "--allow-test", action="store_true", help="Needed with --split test (once per final recipe)."
    )
    parser.add_argument("--extra", choices=EXTRAS, default="none", help="What the arms add to in-batch MNRL.")
    parser.add_argument(
        "--negatives", type=at_least(1), default=3, help="m per anchor (hard-negatives, scrl)."
    )
    parser.add_argument("--chunk", type=at_least(1), default=32, help="Inputs per forward pass (gradcache).")
    parser.add_argument("--prefill", action="store_true", help="hard-negatives: prefill the mined bank.")
    parser.add_argument("--queries", type=at_least(0), default=0, help="Held-out queries scored (0: all).")
    parser.add_argument("--corpus", type=at_least(0), default=0, help="Held-out documents searched (0: all).")
    parser.add_argument("--out", type=Path, help="Folder of the result (default runs/text_vs_st/NAME-EXTRA).")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.arm is not None:
        if args.plan is None:
            parser.error("--arm needs --plan")
        return args
    if args.config is None:
        parser.error("the following arguments are required: config")
    if not args.config.is_file():
        parser.error(f"argument config: no file {args.config}")
    if args.split == "test" and not args.allow_test:
        parser.error("argument --split: test is scored once per final recipe; add --allow-test to confirm")
    if args.prefill and args.extra != "hard-negatives":
        parser.error("argument --prefill: only --extra hard-negatives has a mined bank to prefill")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(arguments)
    if args.arm is not None:
        plan = Plan.load(args.plan)
        figures = crl_arm(plan) if args.arm == "crl" else st_arm(plan)
        plan.path(f"arm-{args.arm}.json").write_text(json.dumps(figures))
        return
    command = shlex.join(["python", "-m", "studies.text_vs_st", *arguments])
    try:
        folder, result = compare(args, command)
    except (ConfigError, ValueError) as error:
        fail(str(error))
    path = folder / RESULT
    path.write_text(json.dumps(result, indent=1))
    print(table(result))
    print(f"batch sequence sha256 {result['batch_sequence_sha256']} ({result['steps']} steps, both arms)")
    print(f"{result['criterion']['statement']}: {result['criterion']['met']}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
