"""What a verify run's summary says about each claim, shared by the terminal table and the report.

Per claim the terminal summary gives what the verdict tests (its evidence), the rule, the level of its parts, the
headline statistic with its interval and that interval's level, the verdict, the negative control's verdict and
the slack of its bound checks; the report's compact table (:data:`TABLE_COLUMNS`) keeps the claim, what it tests
in a few words, the verdict, the headline statistic and the control, and leaves the reasons to each claim's
section. Each cell carries a :class:`Tone`: a control's expected FAIL is good news, not red; an unexpected
result is bad; INCONCLUSIVE is unsure. Rows with an INCONCLUSIVE verdict come first (docs/theory.md section 7:
they exit zero but are listed first). Reconstruction checks (C8) are not verdicts: they have their own table and
never count among the verdicts.

Numbers are printed as they are: an unbounded interval end as -∞ or ∞ (with an open bracket), and the interval of
a quantity that cannot be negative (a KL) clipped at 0 for display, the interval as computed named beside it.
"""

import enum
import math
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

TABLE_COLUMNS = ("claim", "tests", "verdict", "headline statistic [CI] (level)", "negative control")
"""The columns of the report's compact verdict table (and of its table of reconstruction checks)."""


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
    """A number with 4 significant digits; an infinite one as ``∞`` or ``-∞``."""
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.4g}"


def format_level(level: float) -> str:
    """A confidence level with 5 significant digits, e.g. ``0.99833``."""
    return f"{level:.5g}"


def format_interval(statistic: Statistic) -> str:
    """``[low, high]`` of a statistic's confidence interval as shown (:func:`shown_interval`); an unbounded end
    is printed as ``-∞`` or ``∞`` behind an open bracket, e.g. ``[0.12, ∞)``."""
    low, high = shown_interval(statistic)
    left = "(" if low == -math.inf else "["
    right = ")" if high == math.inf else "]"
    return f"{left}{format_number(low)}, {format_number(high)}{right}"


def shown_interval(statistic: Statistic) -> tuple[float, float]:
    """The interval the report shows: as computed, or clipped at 0 for a non-negative quantity (display only:
    the verdict was taken on the interval as computed)."""
    if statistic.nonnegative:
        return max(statistic.ci_low, 0.0), max(statistic.ci_high, 0.0)
    return statistic.ci_low, statistic.ci_high


def clip_note(statistic: Statistic) -> str:
    """``""``, or for an interval shown clipped at 0 what was computed, e.g. ``"CI as computed [-0.002, 0.01],
    shown clipped at 0 (a non-negative quantity)"``."""
    if shown_interval(statistic) == (statistic.ci_low, statistic.ci_high):
        return ""
    computed = f"[{format_number(statistic.ci_low)}, {format_number(statistic.ci_high)}]"
    return f"CI as computed {computed}, shown clipped at 0 (a non-negative quantity)"


def summary_order(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The results with the INCONCLUSIVE ones (claim or control) first, each group in registry order."""
    return sorted(results, key=lambda result: not result.inconclusive)


def verdicts(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The verdicts among ``results`` (not the reconstruction checks), in summary order."""
    return summary_order([result for result in results if result.is_verdict])


def checks(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The reconstruction checks among ``results``, in summary order."""
    return summary_order([result for result in results if not result.is_verdict])


def rule_headline(rule: str) -> str:
    """The rule's pre-registered target: its text after ``docs/... Cn:`` and before crl's fixed constants."""
    text = _RULE_PREFIX.sub("", rule.strip())
    match = _RULE_END.search(text)
    if match is not None:
        text = text[: match.start()]
    return text if len(text) <= _RULE_MAX else text[: _RULE_MAX - 1].rstrip() + "…"


@dataclass(frozen=True)
class Headline:
    """The headline statistic's parts: its name, ``value [low, high]`` and the interval's level."""

    name: str
    numbers: str
    level: str


def headline(result: ClaimResult) -> Headline | None:
    """The first statistic's :class:`Headline`, or None without statistics."""
    if not result.statistics:
        return None
    head = result.statistics[0]
    return Headline(
        head.name, f"{format_number(head.value)} {format_interval(head)}", format_level(head.ci_level)
    )


def headline_text(result: ClaimResult) -> str:
    """``"name: value [low, high] at level"`` of the first statistic, or ``"-"``."""
    head = headline(result)
    return "-" if head is None else f"{head.name}: {head.numbers} at {head.level}"


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


def verdict_cell(result: ClaimResult, *, reasons: bool = True) -> SummaryCell:
    """The claim's verdict: PASS good, FAIL/ERROR bad, INCONCLUSIVE unsure with its reasons (unless
    ``reasons=False``); a PASS with parts whose power gate failed is unsure: "PASS; this rule was not shown able
    to FAIL here" with those parts and their P(FAIL)."""
    if result.verdict is Verdict.PASS and result.unshown_fail:
        return SummaryCell(result.verdict_text, Tone.UNSURE)
    return _verdict_cell(result.verdict, result.reasons if reasons else None, good=Verdict.PASS)


def control_cell(result: ClaimResult, *, reasons: bool = True) -> SummaryCell:
    """The control's verdict: FAIL is expected (good), PASS/ERROR bad, INCONCLUSIVE unsure with its reasons
    (unless ``reasons=False``)."""
    control = result.control
    return _verdict_cell(control.verdict, control.reasons if reasons else None, good=control.expected_verdict)


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


def overall(
    results: Sequence[ClaimResult], broken_modules: Mapping[str, str], *, reasons: bool = True
) -> list[SummaryCell]:
    """The run's conclusion, one toned sentence per kind of news: INCONCLUSIVE first, then what fails the run,
    then the reconstruction checks (which never fail it unless they raise). ``reasons=False`` names the
    INCONCLUSIVE claims without their reasons (the report gives those in each claim's section)."""
    lines = []
    judged = [r for r in results if r.is_verdict]
    unsure = [r for r in judged if r.inconclusive]
    failing = [r for r in results if r.fails_run]
    named = ", ".join(r.claim_id for r in unsure)
    if unsure and reasons:
        text = "; ".join(f"{r.claim_id} ({', '.join(r.inconclusive)})" for r in unsure)
        lines.append(SummaryCell(f"{len(unsure)} claim(s) INCONCLUSIVE (exit status 0): {text}", Tone.UNSURE))
    elif unsure and (failing or broken_modules):
        lines.append(
            SummaryCell(f"{len(unsure)} claim(s) INCONCLUSIVE (exit status 0): {named}", Tone.UNSURE)
        )
    if failing:
        text = "; ".join(f"{r.claim_id} ({', '.join(r.problems)})" for r in failing)
        lines.append(SummaryCell(f"{len(failing)} of {len(results)} claim(s) fail the run: {text}", Tone.BAD))
    if broken_modules:
        names = ", ".join(broken_modules)
        lines.append(
            SummaryCell(f"{len(broken_modules)} claim module(s) failed to import: {names}.", Tone.BAD)
        )
    if not failing and not broken_modules and judged:
        lines.append(
            SummaryCell(
                f"No claim of {len(judged)} fails and no negative control passes; {len(unsure)} INCONCLUSIVE"
                + ("." if reasons else f" (verdict or control: {named}; reasons in their sections)."),
                Tone.UNSURE,
            )
            if unsure
            else SummaryCell(
                f"All {len(judged)} claim(s) pass, and every negative control fails as it must.", Tone.GOOD
            )
        )
    lines += _check_lines([r for r in results if not r.is_verdict])
    return lines


def _check_lines(found: Sequence[ClaimResult]) -> list[SummaryCell]:
    """One sentence on the reconstruction checks: bad news when one FAILs or its control PASSes (the exit status
    is unaffected all the same), else plain."""
    if not found:
        return []
    outcomes = "; ".join(
        f"{r.claim_id} {r.verdict}, control {r.control.verdict}"
        for r in found
        if r.verdict is not Verdict.ERROR
    )
    off = [r for r in found if r.check_findings]
    if off:
        text = "; ".join(f"{r.claim_id} ({', '.join(r.check_findings)})" for r in off)
        return [
            SummaryCell(
                f"{len(off)} reconstruction check(s) not as expected (not verdicts: the exit status is "
                f"unaffected): {text}",
                Tone.BAD,
            )
        ]
    if not outcomes:
        return []
    return [
        SummaryCell(f"Reconstruction check(s), not verdicts (the exit status is unaffected): {outcomes}.")
    ]


def _verdict_cell(verdict: Verdict, reasons: Sequence[str] | None, *, good: Verdict) -> SummaryCell:
    """A verdict in its tone; ``good`` is the verdict that is good news (PASS for claims, FAIL for controls);
    ``reasons`` None leaves an INCONCLUSIVE's reasons out."""
    if verdict is Verdict.INCONCLUSIVE:
        if reasons is None:
            return SummaryCell("INCONCLUSIVE", Tone.UNSURE)
        return SummaryCell(f"INCONCLUSIVE: {'; '.join(reasons) or 'no reason given'}", Tone.UNSURE)
    if verdict is good:
        return SummaryCell(f"{verdict} (expected)" if good is Verdict.FAIL else str(verdict), Tone.GOOD)
    return SummaryCell(f"{verdict} (unexpected)" if verdict is not Verdict.ERROR else str(verdict), Tone.BAD)
