"""Review c4: ``states`` shows a serializer nested as Flink nests it: ``Map<Int, Ttl<Long>>``, where
it printed the snapshot's classes flattened (``Map<Int, Ttl, Long, Long>``, ``List<Ttl, Long, Long>``)."""

from __future__ import annotations

import json

import pytest

from ckptctl.metadata.keyedproxy import SerializerInfo
from tests.support.cli_runner import cli
from tests.support.fixture_cases import REPO, manifest

P = "org.apache.flink.api.common.typeutils."


def info(*classes: str) -> SerializerInfo:
    return SerializerInfo("VALUE_SERIALIZER", classes[0], 1, list(classes[1:]))


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
def test_states_shows_real_flink_serializers_nested(version: str) -> None:
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == "states"
    )
    root = REPO / entry["data_dir"]
    chk = max((p.parent for p in root.glob("checkpoints/*/chk-*/_metadata")), key=lambda p: int(p.name[4:]))
    mapping = ["--rebase", f"{entry['original_root']}={root}"]
    doc = json.loads(cli("states", str(chk), *mapping, "--json").stdout)
    shown = {
        s["name"]: s["serializer_summary"].get("VALUE_SERIALIZER")
        for op in doc["operators"]
        for s in op["states"]
    }
    assert shown["ttl-map"] == "MapSerializer<IntSerializer, TtlSerializer<LongSerializer>>", shown
    assert shown["ttl-list"] == "ListSerializer<TtlSerializer<LongSerializer>>", shown
    assert shown["ttl-value"] == "TtlSerializer<LongSerializer>", shown
    assert shown["plain-map"] == "MapSerializer<StringSerializer, LongSerializer>", shown
    text = cli("states", str(chk), *mapping, env={"COLUMNS": "200"}).stdout
    assert "Map<Int, Ttl<Long>>" in text and "List<Ttl<String>>" in text, text


def test_a_composite_this_reader_does_not_know_is_listed_flat_as_read() -> None:
    row = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
    assert info(row, P + "base.IntSerializer$IntSerializerSnapshot").summary == "RowSerializer<IntSerializer>"
    flat = info(P + "base.MapSerializerSnapshot", P + "base.IntSerializer$IntSerializerSnapshot", row,
                P + "base.LongSerializer$LongSerializerSnapshot")  # fmt: skip
    assert flat.summary == "MapSerializer<IntSerializer, RowSerializer, LongSerializer>"
