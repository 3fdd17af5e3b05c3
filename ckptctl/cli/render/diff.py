"""``ckptctl diff``: files added, removed and reused between two checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes

if TYPE_CHECKING:
    from ckptctl.inspect.diff import CheckpointDiff


DIFF_TOP = 10  # files listed per kind in the human diff


def report(console: Any, r: CheckpointDiff) -> None:
    """``diff``: counts and bytes per kind, what each side uploaded, then the largest files added
    and removed (paths relative to the directory holding both checkpoints)."""
    from ckptctl.cli.output import Table
    from ckptctl.inspect.views import short_uri

    a, b = r.a, r.b
    table = Table(title=f"{a['checkpoint_id']} → {b['checkpoint_id']}", title_justify="left")
    table.add_column("files")
    table.add_column("count", justify="right")
    table.add_column("bytes", justify="right")
    for key in ("added", "removed", "reused"):
        table.add_row(key, str(len(r.files(key))), human_bytes(r.bytes(key)))
    for side in (a, b):
        inh = side.get("inherited") or {}
        if inh.get("files"):
            table.add_row(
                f"{side['checkpoint_id']}: from a claimed savepoint (FLINK-39964)",
                str(inh["files"]), human_bytes(inh["bytes"]),
            )  # fmt: skip
    console.print(table)
    console.print(
        f"uploaded by {a['checkpoint_id']}: {human_bytes(a['uploaded_bytes'])}; "
        f"by {b['checkpoint_id']}: {human_bytes(b['uploaded_bytes'])}"
    )
    base = _common_dir(a["path"], b["path"])
    for key in ("added", "removed"):
        files = sorted(r.files(key), key=lambda f: (-f["size"], f["path"]))
        if not files:
            continue
        listed = Table(
            title=f"{key} ({len(files)}, largest first)" if len(files) > DIFF_TOP else key,
            title_justify="left", show_header=False, box=None, pad_edge=False,
        )  # fmt: skip
        listed.add_column("size", justify="right", no_wrap=True)
        listed.add_column("path", overflow="fold")
        for f in files[:DIFF_TOP]:
            listed.add_row(human_bytes(f["size"]), short_uri(f["path"], base))
        console.print(listed)
        if len(files) > DIFF_TOP:
            console.print(f"… and {len(files) - DIFF_TOP} more (--json lists every file)")


def _common_dir(a: str, b: str) -> str:
    """The deepest directory holding both URIs (e.g. the job directory of two checkpoints)."""
    from ckptctl import storage as st

    d = st.parent(a)
    while d and not st.is_under(b, d) and st.parent(d) != d:
        d = st.parent(d)
    return d
