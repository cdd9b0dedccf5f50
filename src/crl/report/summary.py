"""What a verify run's summary says about each claim, shared by the terminal table and the report.

Per claim the summary gives what the verdict tests (its evidence), the rule, the level of its parts, the headline
statistic with its interval and that interval's level, the verdict, the negative control's verdict and the
slack of its bound checks. Each cell carries a :class:`Tone`: a control's expected FAIL is good news, not red;
an unexpected result is bad; INCONCLUSIVE is unsure and carries its reasons. Rows with an INCONCLUSIVE verdict
come first (docs/theory.md section 7: they exit zero but are listed first).
"""

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crl.claims.base import ClaimResult, Statistic, Verdict
from crl.stats.bounds import INFORMATIVE_SLACK

SUMMARY_COLUMNS = (
    "claim",
    "tests",
    "rule",
    "level (each part)",
    "headline statistic, value [CI] at level",
    "verdict",
    "negative control",
    "bound slack",
    "time",
)
_RULE_PREFIX = re.compile(r"^docs/(?:theory\.md section 7|claims/C\d+\.md),\s*C\d+:\s*")
_RULE_END = re.compile(r"\s+(?:Fixed by crl\b|crl's fixed criterion\b)")
_RULE_MAX = 200


class Tone(enum.StrEnum):
    """How a summary cell reads: good news (green), bad news (red), unsure (yellow), or plain."""

    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"
    PLAIN = "plain"


@dataclass(frozen=True)
class SummaryCell:
    """A summary cell's text and its tone."""

    text: str
    tone: Tone = Tone.PLAIN


def format_number(value: float) -> str:
    """A number with 4 significant digits (``inf`` as is)."""
    return f"{value:.4g}"


def format_level(level: float) -> str:
    """A confidence level with 5 significant digits, e.g. ``0.99833``."""
    return f"{level:.5g}"


def format_interval(statistic: Statistic) -> str:
    """``[low, high]`` of a statistic's confidence interval."""
    return f"[{format_number(statistic.ci_low)}, {format_number(statistic.ci_high)}]"


def summary_order(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The results with the INCONCLUSIVE ones (claim or control) first, each group in registry order."""
    return sorted(results, key=lambda result: not result.inconclusive)


def rule_headline(rule: str) -> str:
    """The rule's pre-registered target: its text after ``docs/... Cn:`` and before crl's fixed constants."""
    text = _RULE_PREFIX.sub("", rule.strip())
    match = _RULE_END.search(text)
    if match is not None:
        text = text[: match.start()]
    return text if len(text) <= _RULE_MAX else text[: _RULE_MAX - 1].rstrip() + "…"


def headline_text(result: ClaimResult) -> str:
    """``"name: value [low, high] at level"`` of the first statistic, or ``"-"``."""
    if not result.statistics:
        return "-"
    head = result.statistics[0]
    return (
        f"{head.name}: {format_number(head.value)} {format_interval(head)} at {format_level(head.ci_level)}"
    )


def level_text(result: ClaimResult) -> str:
    """``"0.99833 (3 parts)"``: the level of each part and of the control."""
    return f"{format_level(result.level)} ({result.parts} part{'s' if result.parts != 1 else ''})"


def slack_cell(result: ClaimResult) -> SummaryCell:
    """The bound's slack (largest measured/bound); below 0.1 it "holds, not informative" (no evidence)."""
    if result.slack is None:
        return SummaryCell("-")
    text = format_number(result.slack)
    if result.slack < INFORMATIVE_SLACK:
        return SummaryCell(f"{text} (holds, not informative)", Tone.UNSURE)
    return SummaryCell(text)


def verdict_cell(result: ClaimResult) -> SummaryCell:
    """The claim's verdict: PASS good, FAIL/ERROR bad, INCONCLUSIVE unsure with its reasons."""
    return _verdict_cell(result.verdict, result.reasons, good=Verdict.PASS)


def control_cell(result: ClaimResult) -> SummaryCell:
    """The control's verdict: FAIL is expected (good), PASS/ERROR bad, INCONCLUSIVE unsure with its reasons."""
    control = result.control
    return _verdict_cell(control.verdict, control.reasons, good=control.expected_verdict)


def summary_cells(result: ClaimResult) -> list[SummaryCell]:
    """One summary row, in the order of :data:`SUMMARY_COLUMNS`."""
    return [
        SummaryCell(f"{result.claim_id} {result.title}"),
        SummaryCell(result.evidence),
        SummaryCell(rule_headline(result.rule)),
        SummaryCell(level_text(result)),
        SummaryCell(headline_text(result)),
        verdict_cell(result),
        control_cell(result),
        slack_cell(result),
        SummaryCell("-" if result.wall_s is None else f"{result.wall_s:.1f} s"),
    ]


def overall(results: Sequence[ClaimResult], broken_modules: Mapping[str, str]) -> list[SummaryCell]:
    """The run's conclusion, one toned sentence per kind of news: INCONCLUSIVE first, then what fails the run."""
    lines = []
    unsure = [r for r in results if r.inconclusive]
    if unsure:
        text = "; ".join(f"{r.claim_id} ({', '.join(r.inconclusive)})" for r in unsure)
        lines.append(SummaryCell(f"{len(unsure)} claim(s) INCONCLUSIVE (exit status 0): {text}", Tone.UNSURE))
    failing = [r for r in results if r.fails_run]
    if failing:
        text = "; ".join(f"{r.claim_id} ({', '.join(r.problems)})" for r in failing)
        lines.append(SummaryCell(f"{len(failing)} of {len(results)} claim(s) fail the run: {text}", Tone.BAD))
    if broken_modules:
        names = ", ".join(broken_modules)
        lines.append(
            SummaryCell(f"{len(broken_modules)} claim module(s) failed to import: {names}.", Tone.BAD)
        )
    if not failing and not broken_modules:
        lines.append(
            SummaryCell(
                f"No claim of {len(results)} fails and no negative control passes; {len(unsure)} INCONCLUSIVE.",
                Tone.UNSURE,
            )
            if unsure
            else SummaryCell(
                f"All {len(results)} claim(s) pass, and every negative control fails as it must.", Tone.GOOD
            )
        )
    return lines


def _verdict_cell(verdict: Verdict, reasons: Sequence[str], *, good: Verdict) -> SummaryCell:
    """A verdict in its tone; ``good`` is the verdict that is good news (PASS for claims, FAIL for controls)."""
    if verdict is Verdict.INCONCLUSIVE:
        return SummaryCell(f"INCONCLUSIVE: {'; '.join(reasons) or 'no reason given'}", Tone.UNSURE)
    if verdict is good:
        return SummaryCell(f"{verdict} (expected)" if good is Verdict.FAIL else str(verdict), Tone.GOOD)
    return SummaryCell(f"{verdict} (unexpected)" if verdict is not Verdict.ERROR else str(verdict), Tone.BAD)
