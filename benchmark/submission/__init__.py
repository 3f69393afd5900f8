"""The submission format v1 (``submissions/README.md``): manifest, safe unpacking, validation."""

from benchmark.submission.archive import Limits, Rejected, ServerFault
from benchmark.submission.manifest import Manifest, json_schema
from benchmark.submission.validate import ImageRecord, Report, stage

__all__ = ["ImageRecord", "Limits", "Manifest", "Rejected", "Report", "ServerFault", "json_schema", "stage"]
