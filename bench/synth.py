"""Synthetic large checkpoints, written with ckptctl's own writer (the benchmarks' inputs).

The shape copies what RocksDB incremental checkpoints really contain (see the fixtures): per
keyed subtask one IncrementalRemoteKeyedStateHandle with a relative meta file, N shared SSTs
under ``<job>/shared/`` and three private files (MANIFEST, OPTIONS, CURRENT).
"""

from __future__ import annotations

import uuid

from ckptctl.metadata import write_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import (
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    LocalFile,
    RelativeFileHandle,
)
from ckptctl.metadata.operators import OperatorState, SubtaskState

# A real CheckpointProperties trailer (Flink 1.20, RETAIN_ON_CANCELLATION checkpoint).
TRAILER = bytes.fromhex(
    "aced0005737200386f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e436865636b70"
    "6f696e7450726f7065727469657300000000000000020200085a00106469736361726443616e63656c6c65645a000d6469"
    "73636172644661696c65645a000f6469736361726446696e69736865645a000f6469736361726453756273756d65645a00"
    "106469736361726453757370656e6465645a0006666f726365645a0009756e636c61696d65644c000e636865636b706f69"
    "6e74547970657400324c6f72672f6170616368652f666c696e6b2f72756e74696d652f636865636b706f696e742f536e61"
    "7073686f74547970653b787000010101010000737200326f72672e6170616368652e666c696e6b2e72756e74696d652e63"
    "6865636b706f696e742e436865636b706f696e7454797065d6de4f0305ae1d3a0200024c00046e616d657400124c6a6176"
    "612f6c616e672f537472696e673b4c001473686172696e6746696c657353747261746567797400474c6f72672f617061"
    "6368652f666c696e6b2f72756e74696d652f636865636b706f696e742f536e617073686f74547970652453686172696e67"
    "46696c657353747261746567793b787074000a436865636b706f696e747e7200456f72672e6170616368652e666c696e6b"
    "2e72756e74696d652e636865636b706f696e742e536e617073686f74547970652453686172696e6746696c657353747261"
    "7465677900000000000000001200007872000e6a6176612e6c616e672e456e756d00000000000000001200007870740010"
    "464f52574152445f4241434b57415244"
)


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> KeyGroupRange:
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end - start + 1)


def synthetic_checkpoint(
    job_dir: str,
    checkpoint_id: int = 100,
    operators: int = 8,
    subtasks: int = 256,
    files_per_subtask: int = 200,
    max_parallelism: int = 4096,
    seed: int = 0,
    shared_pool: list[str] | None = None,
) -> CheckpointMetadata:
    """A V4 checkpoint; with ``shared_pool`` the SSTs are drawn from it (to share files across checkpoints)."""
    rng = uuid.UUID(int=seed)  # deterministic names: uuid5 chained on a seed
    ops = []
    n = 0
    for o in range(operators):
        op_id = uuid.uuid5(rng, f"op{o}").hex
        subs = []
        for i in range(subtasks):
            shared = []
            for f in range(files_per_subtask):
                if shared_pool is not None:
                    path = shared_pool[n % len(shared_pool)]
                else:
                    path = f"{job_dir}/shared/{uuid.uuid5(rng, f'{checkpoint_id}-{o}-{i}-{f}')}"
                n += 1
                shared.append(LocalFile(f"{f + 10:06d}.sst", FileHandle(path, 64 * 1024 * 1024 + f)))
            private = tuple(
                LocalFile(
                    name,
                    FileHandle(
                        f"{job_dir}/shared/{uuid.uuid5(rng, f'{checkpoint_id}-{o}-{i}-{name}')}", 4096
                    ),
                )
                for name in ("MANIFEST-000004", "OPTIONS-000007", "CURRENT")
            )
            handle = IncrementalHandle(
                11, checkpoint_id, str(uuid.uuid5(rng, f"backend{o}-{i}")),
                key_group_range(max_parallelism, subtasks, i), 1 << 20,
                RelativeFileHandle(str(uuid.uuid5(rng, f"meta{checkpoint_id}-{o}-{i}")), 3000),
                tuple(shared), private, str(uuid.uuid5(rng, f"id{checkpoint_id}-{o}-{i}")),
            )  # fmt: skip
            subs.append(SubtaskState(i, False, managed_keyed=handle))
        ops.append(OperatorState(op_id, subtasks, max_parallelism, None, tuple(subs)))
    return CheckpointMetadata(4, checkpoint_id, (), tuple(ops), TRAILER, None)


def synthetic_bytes(job_dir: str, **kwargs) -> bytes:
    return write_metadata(synthetic_checkpoint(job_dir, **kwargs))
