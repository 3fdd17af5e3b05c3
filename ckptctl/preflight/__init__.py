"""``preflight``: whether a changed job restores from a snapshot, decided offline as Flink decides it.

* :mod:`~ckptctl.preflight.uidhash`: the operator id Flink derives from a uid (MurmurHash3_x64_128);
* :mod:`~ckptctl.preflight.serializers`: serializer snapshot against snapshot, by the rules of
  Flink's built-in ``TypeSerializerSnapshot``\\ s;
* :mod:`~ckptctl.preflight.releases`: what depends on the target Flink release;
* :mod:`~ckptctl.preflight.check`: the checks in Flink's order, per operator;
* :mod:`~ckptctl.preflight.statechecks`: per state (kind, serializers, TTL, operator state);
* :mod:`~ckptctl.preflight.description`: NEW as a JSON job description;
* :mod:`~ckptctl.preflight.report`: the findings, the verdict, JUnit XML.
"""

from __future__ import annotations

from ckptctl.preflight.check import run_preflight
from ckptctl.preflight.report import PreflightReport, junit_xml
from ckptctl.preflight.uidhash import operator_id_of_uid

__all__ = ["PreflightReport", "junit_xml", "operator_id_of_uid", "run_preflight"]
