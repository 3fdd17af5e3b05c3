"""plan-rescale on canonical savepoints: the restore bytes of each new subtask are those of its key groups."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_runner import DATA, cli_json

# ---- plan-rescale: canonical savepoints ------------------------------------------------------


def canonical_savepoints() -> list[str]:
    rows = cli_json("ls", str(DATA))
    found = [r["path"] for r in rows if r["savepoint_format"] == "CANONICAL"]
    assert found, "the fixtures hold canonical savepoints"
    return found


def test_canonical_savepoint_handles_cost_the_bytes_of_their_key_groups() -> None:
    """Every byte after the serialization header of a key-group file goes to exactly one new
    subtask; no subtask reads more of a file than the file holds (empty key groups have offset 0)."""
    for sp in canonical_savepoints():
        view = cli_json("show", sp)
        handles = {}  # (operator_id, old subtask) -> (file size on disk, first key-group byte)
        for op in view["operators"]:
            for s in op["subtasks"]:
                for h in s["managed_keyed"]:
                    assert h["type"] == "KeyGroupsSavepointStateHandle"
                    size = Path(h["delegate"]["path"].removeprefix("file:")).stat().st_size
                    first = min(o for o in h["offsets"] if o > 0)
                    handles[(op["operator_id"], s["index"])] = (size, first)
        assert handles
        file_bytes = sum(size for size, _ in handles.values())
        for p in (1, 2, 3, 5):
            plan = cli_json("plan-rescale", sp, "-p", str(p))
            read: dict[tuple[str, int], int] = {}
            for op in plan["operators"]:
                for s in op["subtasks"]:
                    for h in s["handles"]:
                        size, _first = handles[(op["operator_id"], h["old_subtask"])]
                        assert 0 <= h["bytes"] <= size, (sp, p, op["name"], s["index"], h)
                        key = (op["operator_id"], h["old_subtask"])
                        read[key] = read.get(key, 0) + h["bytes"]
                    assert s["download_bytes"] == sum(h["bytes"] for h in s["handles"])
            assert read == {k: size - first for k, (size, first) in handles.items()}, (sp, p)
            assert plan["download_bytes"] <= file_bytes
