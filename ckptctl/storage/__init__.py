"""Storage access: one place that knows about URIs, schemes, endpoints and retries.

``from ckptctl import storage as st`` gives the path model (``st.join``, ``st.parent``, …) and
the :class:`Storage` itself. The modules: :mod:`~ckptctl.storage.uri` (canonical URIs, no I/O),
:mod:`~ckptctl.storage.listing` (what a listing yields, the local walk),
:mod:`~ckptctl.storage.options` (the picklable settings workers rebuild a storage from),
:mod:`~ckptctl.storage.retry` (the one retry policy), :mod:`~ckptctl.storage.store` (the
:class:`Storage`, whose calls are done by :mod:`~ckptctl.storage.reading`, :mod:`~ckptctl.storage.walking`
and :mod:`~ckptctl.storage.writing`), :mod:`~ckptctl.storage.s3list` (concurrent S3 listing) and
:mod:`~ckptctl.storage.copying` (copies that never leave a half-written file). fsspec and s3fs load
only when a filesystem is first needed, which keeps ``ckptctl --help`` instant.
"""

from ckptctl.errors import StorageError
from ckptctl.storage.listing import JOB_AREAS, FileInfo, WalkNotes, is_job_dir_name
from ckptctl.storage.options import StorageOptions
from ckptctl.storage.retry import s3_problem
from ckptctl.storage.store import Storage
from ckptctl.storage.uri import (
    basename,
    check_user_path,
    escapes,
    is_normal,
    is_under,
    java_trim,
    join,
    nest,
    normalize_uri,
    parent,
    real_uri,
    resolve_relative,
    scheme_of,
)

__all__ = [
    "JOB_AREAS",
    "FileInfo",
    "Storage",
    "StorageError",
    "StorageOptions",
    "WalkNotes",
    "basename",
    "check_user_path",
    "escapes",
    "is_job_dir_name",
    "is_normal",
    "is_under",
    "nest",
    "real_uri",
    "java_trim",
    "join",
    "normalize_uri",
    "parent",
    "resolve_relative",
    "s3_problem",
    "scheme_of",
]
