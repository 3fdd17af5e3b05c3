"""``ckptctl show``: one checkpoint as a tree, operators → subtasks → handles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes, styled

if TYPE_CHECKING:
    from ckptctl.inspect.show import CheckpointView


def report(console: Any, r: CheckpointView, named: str | None = None) -> None:
    """``show``: the checkpoint as a tree; file paths relative to the directory holding the
    checkpoint (``chk-7/…``, ``shared/…``, ``savepoint-…/…``), the checkpoint as the user named it."""
    from rich.tree import Tree

    from ckptctl import storage as st

    view = r.view
    base = st.parent(view["path"])
    title = styled("[bold]{} {}[/bold]  {}\n", view["kind"], view["checkpoint_id"], named or view["path"]) + (
        f"format V{view['format_version']}"
        + (f", {view['checkpoint_type']}" if view.get("checkpoint_type") else "")
        + (f" ({view['savepoint_format']})" if view.get("savepoint_format") else "")
        + f", state {human_bytes(view['state_size'])}, incremental {human_bytes(view['incremental_size'])}"
        + f", inline {human_bytes(view['inline_size'])}"
    )
    tree = Tree(title)
    files = sum(
        _file_lines(h) for op in view["operators"] for s in op["subtasks"] for slot in _SLOTS for h in s[slot]
    )
    summarise = files > FILE_LINES
    for op in view["operators"]:
        label = styled("[accent]{}[/accent]", op["operator_id"])
        if op.get("name"):
            label += styled(" {}", op["name"])
        if op.get("uid"):
            label += styled(" (uid {})", op["uid"])
        label += f"  parallelism {op['parallelism']}/{op['max_parallelism']}"
        if op["fully_finished"]:
            label += styled(" [muted]fully finished[/muted]")
        node = tree.add(label)
        if op.get("coordinator_state"):
            node.add(_labelled("coordinator", op["coordinator_state"], base))
        for s in op["subtasks"]:
            if s["finished"]:
                node.add(styled("subtask {} [muted]finished[/muted]", s["index"]))
                continue
            handles = [(slot, h) for slot in _SLOTS for h in s[slot]]
            sub = node.add(
                styled("subtask {}" + ("" if handles else " [muted](no state)[/muted]"), s["index"])
            )
            for slot, h in handles:
                _add_handle(sub.add(_labelled(slot, h, base)), h, base, summarise)
    console.print(tree)
    if summarise:
        console.print(styled(
            "[muted]each handle's files counted on one line (more than {} to list): `ckptctl refs {}` lists each "
            "one[/muted]", f"{FILE_LINES:,}", named or view["path"],
        ))  # fmt: skip


_SLOTS = (
    "managed_keyed",
    "raw_keyed",
    "managed_operator",
    "raw_operator",
    "input_channels",
    "output_channels",
)
# Above this many file lines the tree counts each handle's files instead of listing them: a
# checkpoint of 10^5 files drew 10^5 lines in 15 s, more than a person reads (refs lists them).
FILE_LINES = 2000


def _file_lines(h: dict[str, Any]) -> int:
    """The lines :func:`_add_handle` would give the files of ``h`` and of the handles inside it."""
    n = sum(1 for key in ("shared", "private") for f in h.get(key, ()) if f["handle"])
    n += sum(1 for piece in h.get("handles_and_offsets", ()) if piece["handle"])
    n += sum(_file_lines(h[key]) for key in ("meta", "delegate") if h.get(key))
    return n + sum(
        _file_lines(part) for key in ("materialized", "non_materialized") for part in h.get(key, ())
    )


def _handle_line(h: dict[str, Any], base: str | None = None) -> Any:
    from rich.text import Text

    from ckptctl.inspect.views import short_uri

    parts = [styled("[bold]{}[/bold]", h["type"]), Text(human_bytes(h.get("state_size")))]
    if "key_group_range" in h:
        parts.append(Text(f"key groups {h['key_group_range'][0]}..{h['key_group_range'][1]}"))
    if "path" in h:
        parts.append(styled("{}", short_uri(h["path"], base)))
    if h.get("start_pos"):
        parts.append(Text(f"@{h['start_pos']}"))
    return Text("  ").join(parts)


def _labelled(label: str, h: dict[str, Any], base: str | None) -> Any:
    """``label: <the handle's line>`` (a tree node)."""
    return styled("{}: ", label) + _handle_line(h, base)


def _add_handle(node, h: dict[str, Any], base: str | None = None, summarise: bool = False) -> None:
    """The handles and files inside ``h`` under ``node``; ``summarise``: each kind of file
    counted on one line (with its bytes) instead of a line per file."""
    for key in ("meta", "delegate"):
        if h.get(key):
            child = node.add(_labelled(key, h[key], base))
            _add_handle(child, h[key], base, summarise)
    for key in ("shared", "private"):
        files = [f for f in h.get(key, ()) if f["handle"]]
        if summarise and files:
            node.add(_counted(key, [f["handle"] for f in files]))
            continue
        for f in files:
            node.add(_labelled(f"{key} {f['local_path']}", f["handle"], base))
    for key in ("materialized", "non_materialized"):
        for part in h.get(key, ()):
            _add_handle(node.add(_labelled(key, part, base)), part, base, summarise)
    pieces = [piece for piece in h.get("handles_and_offsets", ()) if piece["handle"]]
    if summarise and pieces:
        node.add(_counted("changelog", [piece["handle"] for piece in pieces]))
        return
    for piece in pieces:
        node.add(_labelled(f"changelog @{piece['offset']}", piece["handle"], base))


def _counted(key: str, handles: list[dict[str, Any]]) -> str:
    """``key: N files  BYTES`` for handles of one kind: files are distinct paths (segments of one
    file, changelog pieces of one upload count once), bytes each distinct (path, offset) once; the
    inline handles (bytes in the ``_metadata``, no file) apart."""
    placed = {(h["path"], h.get("start_pos")): h.get("state_size") or 0 for h in handles if "path" in h}
    inline = [h.get("state_size") or 0 for h in handles if "path" not in h]
    line = f"{key}: {len({path for path, _at in placed}):,} files  {human_bytes(sum(placed.values()))}"
    return line + (f" + {len(inline):,} inline  {human_bytes(sum(inline))}" if inline else "")
