"""NEW as a JSON job description (no staging run): it can show that a restore fails -- a uid
changed, max parallelism set, a state's kind or TTL -- and never that it restores (it carries no
serializer snapshots)."""

from __future__ import annotations

import json

import pytest

from tests.preflight.test_preflight import STATES, preflight

# the 2.2.0 states job as its author would describe it (uids, parallelism, its states)
JOB = {
    "flink": "2.2",
    "backend": "rocksdb",
    "operators": [
        {"uid": "stateful", "parallelism": 2,
         "states": [{"name": "ttl-value", "kind": "VALUE", "ttl": True},
                    {"name": "plain-value", "kind": "VALUE"}]},
        {"uid": "opstate", "parallelism": 2,
         "states": [{"name": "op-list", "kind": "SPLIT_DISTRIBUTE"}, {"name": "op-union", "kind": "UNION"}]},
    ],
}  # fmt: skip


def described(tmp_path, change=None) -> str:
    doc = json.loads(json.dumps(JOB))
    if change:
        change(doc)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_an_unchanged_job_is_unknown_never_restores(tmp_path):
    doc = preflight(STATES, "--against", described(tmp_path), expect=1)
    assert doc["verdict"] == "unknown"
    assert any("no serializer snapshots" in a for a in doc["assumptions"])
    mapping = {
        f["uid"] for f in doc["findings"] if f["check"] == "mapping" and f["outcome"] == "incompatible"
    }
    assert not mapping  # both uids hash to the snapshot's ids


@pytest.mark.parametrize(
    "change, check",
    [
        (lambda d: d["operators"][0].update(uid="stateful-v2"), "mapping"),
        (
            lambda d: d["operators"][0].update(max_parallelism=256, max_parallelism_explicit=True),
            "max-parallelism",
        ),
        (lambda d: d["operators"][0].update(parallelism=200), "parallelism"),
        (lambda d: d["operators"][0]["states"][1].update(kind="LIST"), "kind"),
        (lambda d: d["operators"][1]["states"][1].update(kind="SPLIT_DISTRIBUTE"), "mode"),
    ],
    ids=["uid", "max-parallelism", "parallelism", "kind", "mode"],
)
def test_a_described_change_flink_refuses_fails(tmp_path, change, check):
    doc = preflight(STATES, "--against", described(tmp_path, change), expect=1)
    assert doc["verdict"] == "fails"
    assert check in {f["check"] for f in doc["findings"] if f["outcome"] == "incompatible"}


def test_max_parallelism_not_set_is_adopted(tmp_path):
    def change(d):
        d["operators"][0].update(max_parallelism=256, max_parallelism_explicit=False)

    doc = preflight(STATES, "--against", described(tmp_path, change), expect=1)
    assert ("max-parallelism", "as-is") in {
        (f["check"], f["outcome"]) for f in doc["findings"] if f["uid"] == "stateful"
    }


def test_a_malformed_description_is_one_line(tmp_path):
    from tests.support.cli_runner import cli

    path = described(tmp_path, lambda d: d["operators"][0].pop("parallelism"))
    result = cli("preflight", str(STATES), "--against", path)
    assert result.exit_code == 2 and "parallelism must be an integer" in result.stderr


# the same description in YAML: one model, two syntaxes (by the name's suffix or by content)
YAML_JOB = """\
flink: "2.2"
backend: rocksdb
operators:
  - uid: stateful
    parallelism: 2
    states:
      - {name: ttl-value, kind: VALUE, ttl: true}
      - {name: plain-value, kind: VALUE}
  - uid: opstate
    parallelism: 2
    states:
      - {name: op-list, kind: SPLIT_DISTRIBUTE}
      - {name: op-union, kind: UNION}
"""


@pytest.mark.parametrize("name", ["job.yaml", "job.yml", "job-description"])
def test_a_yaml_description_reads_as_its_json_twin(tmp_path, name):
    path = tmp_path / name
    path.write_text(YAML_JOB)
    doc = preflight(STATES, "--against", str(path), expect=1)
    twin = preflight(STATES, "--against", described(tmp_path), expect=1)
    assert doc["verdict"] == twin["verdict"] == "unknown"
    strip = lambda d: [{k: v for k, v in f.items() if k != "elapsed_seconds"} for f in d["findings"]]  # noqa: E731
    assert strip(doc) == strip(twin)


def test_a_yaml_description_shows_a_renamed_uid_fails(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(YAML_JOB.replace("uid: stateful", "uid: stateful-v2"))
    doc = preflight(STATES, "--against", str(path), expect=1)
    assert doc["verdict"] == "fails"
    assert {f["check"] for f in doc["findings"] if f["outcome"] == "incompatible"} == {"mapping"}


def test_broken_yaml_is_one_line_naming_the_file_and_where(tmp_path):
    from tests.support.cli_runner import cli

    path = tmp_path / "job.yaml"
    path.write_text("operators:\n  - uid: [unclosed\n")
    result = cli("preflight", str(STATES), "--against", str(path))
    assert result.exit_code == 2, result.output
    assert "job.yaml" in result.stderr and "line " in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_text_that_is_no_new_job_is_refused_in_one_line(tmp_path):
    from tests.support.cli_runner import cli

    path = tmp_path / "notes.txt"
    path.write_text("just some words\n")
    result = cli("preflight", str(STATES), "--against", str(path))
    assert result.exit_code == 2, result.output
    assert "notes.txt" in result.stderr and "Traceback" not in result.stderr
