"""Why a file is a candidate or is kept, and why a plan is blocked: codes, not prose.

Plans carry the short codes (stable for scripts and for ``gc apply``'s re-validation); the
console shows the sentence. A new reason is one member and one sentence here.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    # candidates: nothing retained references the file, and every guard let it through
    UNREFERENCED_SHARED = "unreferenced-shared"
    UNREFERENCED_TASKOWNED = "unreferenced-taskowned"
    UNREFERENCED_CHANGELOG = "unreferenced-changelog"
    UNREFERENCED_FORST = "unreferenced-forst"
    INCOMPLETE_CHECKPOINT = "incomplete-checkpoint"
    EXPIRED_CHECKPOINT = "expired-checkpoint"
    EXPIRED_ONLY = "expired-only"
    # kept
    NOT_FLINK_FILE = "not-flink-file"
    IN_SAVEPOINT = "in-savepoint"
    RETAINED_CHECKPOINT_DIR = "retained-checkpoint-dir"
    SYMLINK = "symlink"
    NO_MTIME = "no-mtime"
    FUTURE_MTIME = "future-mtime"
    YOUNG = "young"
    IN_FLIGHT = "in-flight"
    FORST_CONTROL_FILE = "forst-control-file"
    FORST_IN_USE = "forst-in-use"
    CHANGELOG_UNSCANNED_JOB = "changelog-unscanned-job"
    CHANGELOG_FIXED_JOB_ID = "changelog-fixed-job-id"
    ABNORMAL_PATH = "abnormal-path"
    DEAD_JOB = "dead-job"
    JOB_ACTIVE = "job-active"
    AFTER_INVENTORY = "after-inventory"
    OTHER_MOUNT = "other-mount"

    @property
    def text(self) -> str:
        return _TEXT[self]


_TEXT = {
    Reason.UNREFERENCED_SHARED: "unreferenced shared file",
    Reason.UNREFERENCED_TASKOWNED: "unreferenced task-owned file",
    Reason.UNREFERENCED_CHANGELOG: "unreferenced changelog (DSTL) file",
    Reason.UNREFERENCED_FORST: "unreferenced ForSt working file",
    Reason.INCOMPLETE_CHECKPOINT: "incomplete checkpoint directory (no _metadata)",
    Reason.EXPIRED_CHECKPOINT: "expired checkpoint (--keep-last), deleted as a unit, _metadata first",
    Reason.EXPIRED_ONLY: "referenced only by expired checkpoints (--keep-last)",
    Reason.NOT_FLINK_FILE: "not a Flink file (outside <job-id>/{shared,taskowned,chk-N}, or a job dir without Flink evidence)",
    Reason.IN_SAVEPOINT: "inside a savepoint directory",
    Reason.RETAINED_CHECKPOINT_DIR: "unreferenced file inside a retained checkpoint directory",
    Reason.SYMLINK: "symbolic link (never followed or deleted)",
    Reason.NO_MTIME: "no modification time, or one before 2016 that no Flink file can have (age unknown)",
    Reason.FUTURE_MTIME: "modification time in the future",
    Reason.YOUNG: "younger than --older-than",
    Reason.IN_FLIGHT: "not older than the newest retained checkpoint of its job (with none: the start of its newest "
    "chk-N) minus --margin (may be in flight)",
    Reason.FORST_CONTROL_FILE: "control file of a ForSt database (CURRENT, MANIFEST, OPTIONS, ...)",
    Reason.FORST_IN_USE: "in a ForSt working directory a retained checkpoint uses (live in a running job)",
    Reason.CHANGELOG_UNSCANNED_JOB: "changelog file of a job whose checkpoints are not scanned",
    Reason.CHANGELOG_FIXED_JOB_ID: "changelog file of a fixed job id (application mode with HA) that a deployment "
    "not scanned may share (--collect-fixed-id-changelog)",
    Reason.ABNORMAL_PATH: "path not in normal form (//, . or ..): Flink cannot have written it",
    Reason.DEAD_JOB: "file of a job with no retained checkpoint, kept (a CLAIM job elsewhere may borrow it; "
    "--collect-dead-jobs)",
    Reason.JOB_ACTIVE: "file of a job with no retained checkpoint that wrote a file or a chk-N less than "
    "--older-than + --margin ago: it may be running, its first checkpoint in flight (kept whole)",
    Reason.AFTER_INVENTORY: "modified after the S3 Inventory report began (--inventory): the report cannot speak for it",
    Reason.OTHER_MOUNT: "on another mount below the root, not named as a ROOT (a second mount of the same storage "
    "names the root's files again)",
}

UNREFERENCED = frozenset(
    {
        Reason.UNREFERENCED_SHARED,
        Reason.UNREFERENCED_TASKOWNED,
        Reason.UNREFERENCED_CHANGELOG,
        Reason.UNREFERENCED_FORST,
    }
)


class Refusal(StrEnum):
    """Why nothing of a plan may be deleted."""

    UNREADABLE_METADATA = "unreadable-metadata"
    MOVED_DIRECTORY = "moved-directory"
    EXTERNAL_REFERENCES = "external-references"
    MISSING_LIVE_FILES = "missing-live-files"
    OVERLAPPING_SCOPES = "overlapping-scopes"
    FUTURE_MTIME = "future-mtime"
    CLOCK_UNKNOWN = "clock-unknown"
    CHECKPOINTS_CHANGED = "checkpoints-changed"
    DELETE_FRACTION = "delete-fraction"
    EMPTY_LIVE_SET = "empty-live-set"
    NAME_COLLISION = "name-collision"
    KEEP_LAST_ORDER = "keep-last-order"
    JOB_STARTING = "job-starting"
    METADATA_BEING_WRITTEN = "metadata-being-written"
    ALIASED_PATH = "aliased-path"
    OTHER_MOUNT = "other-mount"
    SIBLING_REFERENCES = "sibling-references"


def describe(code: str) -> str:
    """The sentence for a reason code (codes from newer plans are shown as they are)."""
    try:
        return Reason(code).text
    except ValueError:
        return code
