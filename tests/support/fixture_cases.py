"""The real Flink fixtures and Flink's own view of them (fixtures/manifest.json + expected/).

Each case pairs a ``_metadata`` written by real Flink (copied away from the directory Flink wrote
it in) with the JSON that Flink's ``Checkpoints.loadCheckpointMetadata`` produced for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


@dataclass(frozen=True)
class Case:
    flink_version: str
    scenario: str
    original_root: str  # absolute path the scenario was written at
    data_root: Path  # where it is now
    checkpoint_dir: Path
    expected_file: Path

    @property
    def id(self) -> str:
        return f"{self.flink_version}/{self.scenario}/{self.checkpoint_dir.relative_to(self.data_root)}"

    def expected(self) -> dict:
        return json.loads(self.expected_file.read_text())

    def to_current(self, uri: str) -> str:
        """Map a path as Flink reported it (original location) to where the fixture is now."""
        for prefix in ("file:", ""):
            old = prefix + self.original_root
            if uri == old or uri.startswith(old + "/"):
                return "file:" + str(self.data_root) + uri[len(old) :]
        return uri


def manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


def cases() -> list[Case]:
    out = []
    for entry in manifest()["entries"]:
        data_root = REPO / entry["data_dir"]
        expected_root = REPO / entry["expected_dir"]
        for exp in sorted(expected_root.rglob("*.json")):
            rel = exp.relative_to(expected_root).with_suffix("")
            out.append(
                Case(entry["flink_version"], entry["scenario"], entry["original_root"], data_root,
                     data_root / rel, exp)
            )  # fmt: skip
    return out


def scenario_roots() -> list[tuple[str, str, Path, str]]:
    """(flink_version, scenario, data root, original root) of every scenario."""
    return [
        (e["flink_version"], e["scenario"], REPO / e["data_dir"], e["original_root"])
        for e in manifest()["entries"]
    ]


def written_root() -> str:
    """Where every fixture was written (fixtures/generate.sh), derived from the manifest: the
    directory that ``fixtures/data`` was moved from. Every entry must agree."""
    found = set()
    for e in manifest()["entries"]:
        rel = e["data_dir"].removeprefix("fixtures/data/")
        assert e["original_root"].endswith("/" + rel), e["original_root"]
        found.add(e["original_root"][: -len(rel) - 1])
    assert len(found) == 1, found
    return found.pop()


def data_rebase(data: Path) -> list[str]:
    """``--rebase`` for a copy of fixtures/data at ``data`` (or fixtures/data itself): the fixtures
    were written elsewhere and moved, and the gates judge the paths Flink would open, so checking
    them where they are now is a what-if that names the mapping."""
    return ["--rebase", f"{written_root()}={data}"]


def rescale_checkpoint() -> str:
    truth = json.loads(sorted((REPO / "fixtures" / "rescale").glob("*.json"))[0].read_text())
    return str(REPO / truth["checkpoint"])
