"""The path model: canonical URIs and the path arithmetic on them, without any storage access.

Everything above the storage speaks canonical URIs: ``file:/abs/path`` (the single-slash form
Flink itself writes) and ``s3://bucket/key`` (``s3a``/``s3n``/``s3p`` are folded into ``s3`` so the
same object is never seen under two names). Pure string functions: cheap to import anywhere.
"""

from __future__ import annotations

import os
import posixpath

S3_ALIASES = ("s3a", "s3n", "s3p")


def normalize_uri(location: str) -> str:
    """Canonical URI of a local path or storage URI, with Flink ``Path`` semantics.

    Flink's ``Path`` turns backslashes into slashes, collapses runs of slashes and then applies
    ``URI.normalize()`` (drops ``.`` segments, resolves ``..``), so ``s3://b/ck//job/./shared/x``
    and ``s3://b/ck/job/shared/sub/../x`` name the same object Flink opens. ckptctl must see the
    same file, or gc would keep the literal spelling alive and delete the real one. A ``..`` that
    climbs above the bucket stays in the result (Flink keeps it too): see :func:`escapes`.
    """
    loc = java_trim(location)
    scheme, sep, rest = loc.partition("://")
    if sep and scheme.lower() in (*S3_ALIASES, "s3"):
        bucket, slash, key = rest.partition("/")
        if not slash:
            return "s3://" + bucket
        return "s3://" + bucket + "/" + _clean_key(key)
    if sep and scheme.lower() == "file":
        # file:///x -> file:/x ; file://localhost/x -> file:/x
        path = rest[rest.index("/") :] if not rest.startswith("/") and "/" in rest else rest
        return "file:" + clean_local(path)
    if loc.startswith("file:"):
        return "file:" + clean_local(loc[5:])
    if sep:
        return loc.rstrip("/")
    return "file:" + clean_local(os.path.abspath(os.path.expanduser(loc)))


def java_trim(text: str) -> str:
    """``String.trim()``: Flink's ``Path(String)`` drops every character up to U+0020 at both ends
    (Python's ``strip()`` drops other ones), so ``shared/x `` names the file ``shared/x``."""
    i, j = 0, len(text)
    while i < j and text[i] <= " ":
        i += 1
    while j > i and text[j - 1] <= " ":
        j -= 1
    return text[i:j]


def check_user_path(what: str, value: str) -> None:
    """A path the user typed (or a plan file carries) must mean exactly what it says: not empty
    (an unset ``$ROOT`` is not the current directory), no blanks at its ends that Flink-style
    trimming would silently drop, no NUL, encodable."""
    from ckptctl.errors import CkptError

    if not value or java_trim(value) != value:
        raise CkptError(f"{what} {value!r} is empty or has blanks or control characters at an end")
    if "\x00" in value:
        raise CkptError(f"{what} {value!r} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CkptError(f"{what} {value!r} is not valid Unicode") from None


SUPPORTED_SCHEMES = ("file", "s3")


def _clean_key(key: str) -> str:
    """An object key as Flink's ``Path`` normalises it: no empty, ``.`` or resolvable ``..`` parts."""
    out: list[str] = []
    for part in key.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == ".." and out and out[-1] != "..":
            out.pop()
        else:
            out.append(part)
    return "/".join(out)


def clean_local(path: str) -> str:
    path = "/" + path.replace("\\", "/").lstrip("/")
    cleaned = posixpath.normpath(path)
    return "/" if cleaned == "//" else cleaned


def escapes(uri: str) -> bool:
    """True if a normalised URI still climbs above its bucket (``s3://b/../x``): it names no
    object under any root, whatever its prefix looks like."""
    return uri.startswith("s3://") and ("/../" in uri or uri.endswith("/.."))


def is_normal(uri: str) -> bool:
    """True if ``uri`` is already in the form :func:`normalize_uri` gives (checked cheaply)."""
    if not uri.startswith(("s3://", "file:")):
        return True
    body = uri[5:]
    return not (
        "//" in body or "/./" in body or "/../" in body or "\\" in body
        or body.endswith(("/.", "/..")) or (body.endswith("/") and len(body) > 1)
    )  # fmt: skip


def resolve_relative(base_dir: str, relative: str) -> str:
    """The file a ``RelativeFileStateHandle`` names: ``new Path(exclusiveDir, new Path(relative))``.

    As in Flink, a relative path with a scheme is absolute, a leading slash is dropped, and
    ``..`` is resolved, so ``../shared/x`` in ``chk-9`` is the job's ``shared/x``.
    """
    colon, slash = relative.find(":"), relative.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return normalize_uri(relative)
    return normalize_uri(base_dir.rstrip("/") + "/" + relative.lstrip("/\\"))


def scheme_of(uri: str) -> str:
    return "s3" if uri.startswith("s3://") else "file" if uri.startswith("file:") else uri.split(":", 1)[0]


def join(uri: str, *names: str) -> str:
    out = uri.rstrip("/")
    for name in names:
        out = out + "/" + name.strip("/")
    return out


def parent(uri: str) -> str:
    head, _, _ = uri.rstrip("/").rpartition("/")
    if head in ("file:", "s3:/"):
        return head + "/"
    return head


def basename(uri: str) -> str:
    return uri.rstrip("/").rpartition("/")[2]


def is_under(uri: str, root: str) -> bool:
    """True if ``uri`` is ``root`` or inside it; compares whole path segments (job-a is not job-ab)."""
    root = root.rstrip("/")
    return uri == root or uri.startswith(root + "/")


def real_uri(uri: str) -> str:
    """A local URI with every symbolic link on its way resolved (the part that does not exist yet
    kept as written): where the bytes would really go. Other URIs as they are (no links there)."""
    if scheme_of(uri) != "file":
        return uri
    import os

    return "file:" + os.path.realpath(uri[5:])


def nest(a: str, b: str) -> bool:
    """``a`` and ``b`` are the same directory or one holds the other, as written or where they
    really are: a symlink (``ln -s src/job/chk-7 dst``) or a linked mount point must not hide that a
    destination lies inside a source (strings alone cannot see it)."""
    if is_under(a, b) or is_under(b, a):
        return True
    ra, rb = real_uri(a), real_uri(b)
    return is_under(ra, rb) or is_under(rb, ra)
