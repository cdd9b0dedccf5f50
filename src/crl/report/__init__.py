"""The report of a `crl verify` run: figures drawn from the claims' data, report.md and report.html."""

from crl.report.document import ReportFiles, write_report
from crl.report.figures import render_figure
from crl.report.sections import REFERENCES, RunInfo

__all__ = ["REFERENCES", "ReportFiles", "RunInfo", "render_figure", "write_report"]
