"""The checks of one state of a mapped operator: its kind, serializers and TTL, keyed or operator state.

Keyed state (``RegisteredKeyValueStateBackendMetaInfo``, the backends' restore): the kind must
stay; the namespace serializer must be as-is; the value serializer may need migration (RocksDB
rewrites the values at restore, the heap backend holds objects and refuses only an incompatible
one); a MapState's user keys are RocksDB keys and must be as-is there; TTL switched on or off is
decided per release and backend (:func:`ckptctl.preflight.releases.ttl_switch`). Operator state
(list, union, broadcast; ``DefaultOperatorStateBackend``): the distribution mode must stay, only an
incompatible serializer fails. Each finding carries the exception Flink throws, as it prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl.preflight import releases
from ckptctl.preflight import serializers as ser
from ckptctl.preflight.report import AS_IS, INCOMPATIBLE, MIGRATION, UNKNOWN

if TYPE_CHECKING:
    from ckptctl.metadata.keyedproxy import SerializerInfo
    from ckptctl.states.catalog import StateEntry

ISE = "java.lang.IllegalStateException"
SME = "org.apache.flink.util.StateMigrationException"


def snap(info: SerializerInfo | None) -> ser.Snap | None:
    return None if info is None else ser.Snap(info.snapshot_class, info.version, info.body)


def is_heap(backend: str | None) -> bool:
    return backend in ("hashmap", "full-snapshot")


def states(ctx, oc, noc, backend) -> None:
    new_states = noc.states if noc is not None else {}
    for name, st in oc.states.items():
        nst = new_states.get(name)
        if nst is None:
            ctx.assume(
                f"state {name!r} of operator {oc.operator_id} is not registered by NEW's staging run: assumed "
                "unused by the new job (Flink keeps it unread; a state registered later is checked when it is)"
            )
            ctx.add(oc, "state", AS_IS, "not registered by NEW: kept unread", state=name)
            continue
        if st.scope == "operator":
            _operator_state(ctx, oc, st, nst)
        else:
            _keyed_state(ctx, oc, st, nst, backend)


def _operator_state(ctx, oc, st: StateEntry, nst: StateEntry) -> None:
    name = st.name
    if st.kind != nst.kind:
        ctx.add(oc, "mode", INCOMPATIBLE, f"distribution mode {st.kind} → {nst.kind}", state=name,
                flink_error=f"{ISE}: Incompatible operator state distribution mode for state {name}: "
                f"{st.kind} → {nst.kind}.")  # fmt: skip
        return
    checks = [("VALUE_SERIALIZER", "value-serializer")]
    if st.kind == "BROADCAST":
        checks.insert(0, ("KEY_SERIALIZER", "key-serializer"))
    for key, check in checks:
        o, n = snap(st.serializers.get(key)), snap(nst.serializers.get(key))
        if o is None or n is None:
            ctx.add(oc, check, UNKNOWN, "serializer snapshot not readable", state=name)
            continue
        c = ser.resolve(o, n)
        if c.outcome == INCOMPATIBLE:
            what = "key" if key == "KEY_SERIALIZER" else "state"
            kind = "broadcast" if st.kind == "BROADCAST" else "operator"
            ctx.add(oc, check, INCOMPATIBLE, c.detail, state=name,
                    flink_error=f"{SME}: The new {what} typeSerializer for {kind} state must not be incompatible.")  # fmt: skip
        elif c.outcome == UNKNOWN:
            ctx.add(oc, check, UNKNOWN, c.detail, state=name, blocking_class=c.blocking)
        else:  # operator state is deserialized on restore: migration is only a rewrite
            ctx.add(
                oc, check, c.outcome, c.detail, state=name, bytes=st.bytes if c.outcome == MIGRATION else None
            )


def _keyed_state(ctx, oc, st: StateEntry, nst: StateEntry, backend) -> None:
    name = st.name
    heap = is_heap(backend)
    if st.kind != nst.kind:
        ctx.add(oc, "kind", INCOMPATIBLE, f"{st.kind} → {nst.kind}", state=name,
                flink_error=f"{ISE}: Incompatible key/value state types. Was [{st.kind}], registered with "
                f"[{nst.kind}].")  # fmt: skip
        return
    ns_o, ns_n = (
        snap(st.serializers.get("NAMESPACE_SERIALIZER")),
        snap(nst.serializers.get("NAMESPACE_SERIALIZER")),
    )
    if ns_o is not None and ns_n is not None:
        c = ser.resolve(ns_o, ns_n, "namespace")
        if c.outcome in (MIGRATION, INCOMPATIBLE):
            ctx.add(oc, "namespace-serializer", INCOMPATIBLE, c.detail, state=name,
                    flink_error=f"{SME}: " + ("For heap backends, the new namespace serializer must be compatible."
                                              if heap else "The new namespace serializer must be compatible."))  # fmt: skip
        elif c.outcome == UNKNOWN:
            ctx.add(oc, "namespace-serializer", UNKNOWN, c.detail, state=name, blocking_class=c.blocking)
    o, n = snap(st.serializers.get("VALUE_SERIALIZER")), snap(nst.serializers.get("VALUE_SERIALIZER"))
    if (
        o is not None
        and n is None
        and not nst.serializers
        and not st.timers
        and bool(st.ttl) != bool(nst.ttl)
    ):
        _ttl_switch(ctx, oc, st, nst, o, None, backend)  # NEW without snapshots (a description, a plan)
        return
    if o is None or n is None:
        ctx.add(oc, "value-serializer", UNKNOWN, "no value serializer recorded", state=name)
        return
    if st.timers:
        c = ser.resolve(o, n, "timer")
        outcome = AS_IS if c.outcome == AS_IS else (UNKNOWN if c.outcome == UNKNOWN else INCOMPATIBLE)
        ctx.add(oc, "value-serializer", outcome, c.detail, state=name, blocking_class=c.blocking,
                flink_error=None if outcome != INCOMPATIBLE else f"{SME}: The new priority queue serializer must "
                "not be incompatible.")  # fmt: skip
        return
    if bool(st.ttl) != bool(nst.ttl):
        _ttl_switch(ctx, oc, st, nst, o, n, backend)
        return
    if st.kind == "MAP" and _map_keys(ctx, oc, st, nst, o, n, heap, backend):
        return
    c = ser.resolve(o, n, "value")
    _value_outcome(ctx, oc, st, nst, c, heap)


def _value_outcome(ctx, oc, st, nst, c, heap, check: str = "value-serializer") -> None:
    name = st.name
    if c.outcome == INCOMPATIBLE:
        msg = ("For heap backends, the new state serializer ({new}) must not be incompatible with the old state "
               "serializer ({old})." if heap else
               "The new state serializer ({new}) must not be incompatible with the old state serializer ({old}).")  # fmt: skip
        ctx.add(oc, check, INCOMPATIBLE, c.detail, state=name,
                flink_error=f"{SME}: " + msg.format(new=_summary(nst), old=_summary(st)))  # fmt: skip
    elif c.outcome == UNKNOWN:
        ctx.add(oc, check, UNKNOWN, c.detail, state=name, blocking_class=c.blocking)
    elif c.outcome == MIGRATION:
        ctx.add(oc, check, MIGRATION, f"{c.detail}: values rewritten at restore", state=name,
                bytes=oc.keyed_bytes or None)  # fmt: skip
    else:
        ctx.add(oc, check, AS_IS, c.detail, state=name)


def _summary(st) -> str:
    return printed(st.serializers.get("VALUE_SERIALIZER"))


def printed(v: SerializerInfo | None) -> str:
    """A serializer as Flink's messages print it (``toString``: class@identity hash, which no
    snapshot records): ``LongSerializer$LongSerializerSnapshot`` → ``LongSerializer@…``."""
    if v is None:
        return "?"
    cls = v.snapshot_class
    if "$" in cls:  # X$XSnapshot → X; TtlStateFactory$TtlSerializerSnapshot → TtlStateFactory$TtlSerializer
        outer, inner = cls.rsplit("$", 1)
        base = inner.removesuffix("Snapshot")
        name = outer if outer.rsplit(".", 1)[-1].rsplit("$", 1)[-1] == base else f"{outer}${base}"
    else:
        name = cls.removesuffix("Snapshot")
    return f"{name}@…"


def _map_keys(ctx, oc, st, nst, o, n, heap, backend) -> bool:
    """MapState: the user key serializer. RocksDB keeps map keys in its own keys: they must be
    as-is (``migration for MapState currently only allows value schema evolutions``); heap
    only refuses an incompatible one. True when a finding ends the state's checks."""
    on, nn = ser.nested_of(o), ser.nested_of(n)
    if on is None or nn is None or len(on) != 2 or len(nn) != 2:
        return False  # the map serializer's own comparison decides (or says unknown)
    c = ser.resolve(on[0], nn[0], "map key")
    if c.outcome == AS_IS:
        ctx.add(oc, "user-key-serializer", AS_IS, c.detail, state=st.name)
        return False
    if c.outcome == UNKNOWN:
        ctx.add(oc, "user-key-serializer", UNKNOWN, c.detail, state=st.name, blocking_class=c.blocking)
        return True
    if c.outcome == INCOMPATIBLE:
        _value_outcome(ctx, oc, st, nst, c, heap)
        return True
    if heap:
        ctx.add(oc, "user-key-serializer", MIGRATION, f"{c.detail}: map keys rewritten (heap)", state=st.name)
        return False
    if backend is None:
        ctx.add(oc, "user-key-serializer", UNKNOWN,
                f"{c.detail}: RocksDB refuses a map key migration, the heap backend does it; NEW's backend is "
                "not known (--target-backend)", state=st.name)  # fmt: skip
        return True
    ctx.add(oc, "user-key-serializer", INCOMPATIBLE, c.detail, state=st.name,
            flink_error=f"{SME}: The new serializer for a MapState requires state migration in order for the job "
            "to proceed, since the key schema has changed. However, migration for MapState currently only allows "
            "value schema evolutions.")  # fmt: skip
    return True


def _ttl_switch(ctx, oc, st, nst, o, n, backend) -> None:
    """TTL switched on or off: the value serializer gains or loses the TTL wrapper."""
    name = st.name
    on = "on" if nst.ttl else "off"
    family = "heap" if is_heap(backend) else ("rocksdb" if backend in ("rocksdb", "forst") else None)
    rule = releases.ttl_switch(ctx.target, ctx.newest, family)
    where = (
        f"TTL switched {on} (Flink {releases.shown(ctx.target, ctx.newest)}, {backend or 'backend unknown'})"
    )
    if rule == "incompatible":
        if is_heap(backend) and ctx.target >= releases.HEAP_TTL_MESSAGE_FROM:
            ctx.add(oc, "ttl", INCOMPATIBLE, where, state=name,
                    flink_error=f"{SME}: For heap backends, the new state serializer ({_summary(nst)}) must not need "
                    f"ttl state migration with the old state serializer ({_summary(st)}).")  # fmt: skip
            return
        _value_outcome(ctx, oc, st, nst, ser.Compat(INCOMPATIBLE, where), is_heap(backend), "ttl")
        return
    if rule == "unknown":
        ctx.add(oc, "ttl", UNKNOWN, f"{where}: migrated or refused depending on the release and backend",
                state=name, blocking_class=ser.TTL)  # fmt: skip
        return
    if n is None:  # NEW has no serializer snapshot: the wrapped serializers cannot be compared
        ctx.add(oc, "ttl", UNKNOWN, f"{where}: migrated if the serializers inside are compatible; NEW has no "
                "serializer snapshot to compare", state=name, blocking_class=ser.TTL)  # fmt: skip
        return
    # migration: the user's serializers inside must still be compatible
    inner_o = ser.ttl_unwrapped(o) or o
    inner_n = ser.ttl_unwrapped(n) or n
    if st.kind in ("LIST", "MAP"):
        c = ser.Compat(UNKNOWN, f"{where}: TTL inside a {st.kind.lower()} serializer", ser.TTL)
    else:
        c = ser.resolve(inner_o, inner_n, "value")
    if c.outcome in (INCOMPATIBLE, UNKNOWN):
        _value_outcome(ctx, oc, st, nst, c, is_heap(backend))
        return
    ctx.add(
        oc,
        "ttl",
        MIGRATION,
        f"{where}: values rewritten at restore",
        state=name,
        bytes=oc.keyed_bytes or None,
    )
