"""``history --html``: the page opened in a real headless Chromium (Debian's ``chromium``), and what
it shows read back from the DOM the browser built, after its layout (the page's script records each
drawn layer's rendered height). Skips, saying why, only where no Chromium can be found."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.history.test_history import BASIC
from tests.support.cli_runner import cli, cli_json


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium here: install it with `apt-get install -y chromium` (.ci/run does as root)")


def dump_dom(page: Path) -> str:
    """The DOM after load, from a headless Chromium with nothing reaching beyond this machine."""
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}",
             "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": profile},
        )  # fmt: skip
    assert proc.returncode == 0 and "<body" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def _attrs(tag: str, cls: str, dom: str) -> list[dict[str, str]]:
    return [
        dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        for m in re.finditer(rf'<{tag} class="{cls}"([^>]*)>', dom)
    ]


def test_page_shows_stacked_series_uploads_and_ranking(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    shutil.copytree(BASIC, root)
    page = tmp_path / "history.html"
    assert cli("history", str(root), "--html", str(page)).exit_code == 0
    assert not re.search(r'(src|href)="(https?:)?//', page.read_text())  # nothing fetched
    doc = cli_json("history", str(root))["jobs"][0]
    dom = dump_dom(page)
    assert 'data-rendered="2"' in dom  # the script ran: both charts are SVG the browser laid out
    layers = _attrs("path", "layer", dom)
    assert {a["data-operator-id"] for a in layers} == {o["operator_id"] for o in doc["operators"]}
    for a in layers:  # each layer is as tall as the operator's bytes make it: stateless ones are flat
        o = next(o for o in doc["operators"] if o["operator_id"] == a["data-operator-id"])
        assert int(a["data-last-bytes"]) == o["full_bytes"]
        assert (float(a["data-rendered-height"]) > 1) == any(s["full_bytes"] for s in o["series"])
    uploaded = _attrs("rect", "uploaded", dom)
    assert [int(a["data-bytes"]) for a in uploaded] == [c["uploaded_bytes"] for c in doc["checkpoints"]]
    reused = _attrs("rect", "reused", dom)
    assert [int(a["data-bytes"]) for a in reused] == [c["reused_bytes"] for c in doc["checkpoints"]]
    ranking = re.findall(r'<li data-rank="(\d+)" data-operator="([^"]*)"', dom)
    by_rank = sorted(doc["operators"], key=lambda o: o["rank"])
    assert ranking == [(str(o["rank"]), o["display"]) for o in by_rank]


def test_page_of_the_leaking_run_shows_the_leak_on_top(tmp_path: Path) -> None:
    """fixtures/history/2.3.0/leak (operator names recorded): the page ranks ``sessions`` first,
    and of the stacked layers Chromium drew, its band is the one that widens most."""
    from tests.history.test_rest_oracle import HISTORY, copied

    run = HISTORY / "2.3.0" / "leak"
    if not run.is_dir():
        pytest.skip(f"{run} not generated (fixtures/history/generate.sh)")
    root = copied(run, tmp_path)
    page = tmp_path / "leak.html"
    assert cli("history", str(root), "--html", str(page)).exit_code == 0
    dom = dump_dom(page)
    ranking = re.findall(r'<li data-rank="(\d+)" data-operator="([^"]*)"', dom)
    assert ranking[0] == ("1", "sessions")
    layers = {a["data-operator"]: a for a in _attrs("path", "layer", dom)}
    grown = {name: int(a["data-last-bytes"]) - int(a["data-first-bytes"]) for name, a in layers.items()}
    assert max(grown, key=grown.get) == "sessions"
    tallest = max(layers.values(), key=lambda a: float(a["data-rendered-height"]))
    assert tallest["data-operator"] == "sessions"
