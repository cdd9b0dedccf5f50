"""The report of a `crl verify` run: figures drawn from the claims' data, report.md and report.html."""

from crl.report.document import ReportFiles, RunInfo, write_report
from crl.report.figures import render_figure

__all__ = ["ReportFiles", "RunInfo", "render_figure", "write_report"]
