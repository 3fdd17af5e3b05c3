"""``history --html FILE``: one self-contained page (inline SVG and CSS, nothing fetched).

Per job: full bytes per operator stacked over the checkpoints (one ``<path class="layer">`` per
operator), uploaded vs reused bytes per checkpoint (``<rect class="uploaded">`` / ``"reused"``), and
the growth ranking (``<ol class="ranking">``). Every drawn element carries its figures in
``data-*`` attributes, and a few lines of inline script record what the browser laid out
(``data-rendered-height`` of each layer), so a test can read back what a browser shows.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ckptctl.sizes import human_bytes

W, H, PAD = 900, 300, 50
COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def _bytes(n: float | None) -> str:
    return human_bytes(n, none="—")


def _rate(o: dict[str, Any]) -> str:
    if o["slope_bytes_per_day"] is not None:
        pct = o["slope_percent_per_day"]
        return f"{_bytes(o['slope_bytes_per_day'])}/d" + ("" if pct is None else f" ({pct:+.1f}%/d)")
    if o["slope_bytes_per_checkpoint"] is not None:
        return f"{_bytes(o['slope_bytes_per_checkpoint'])}/checkpoint"
    return "—"


def _stacked(job: dict[str, Any]) -> str:
    cks = job["checkpoints"]
    ops = sorted(job["operators"], key=lambda o: o["rank"], reverse=True)  # the fastest on top
    n = len(cks)
    if n == 0:
        return "<p>no checkpoints</p>"
    top = max(1, max(c["full_bytes"] for c in cks))

    def x(i: int) -> float:
        return PAD + (W - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * v / top

    base = [0.0] * n
    parts = []
    for k, o in enumerate(ops):
        vals = [float(s["full_bytes"]) for s in o["series"]]
        upper = [b + v for b, v in zip(base, vals, strict=True)]
        pts = [f"{x(i):.1f},{y(upper[i]):.1f}" for i in range(n)]
        pts += [f"{x(i):.1f},{y(base[i]):.1f}" for i in reversed(range(n))]
        color = COLORS[k % len(COLORS)]
        parts.append(
            f'<path class="layer" data-operator="{escape(o["display"])}" data-operator-id="{o["operator_id"]}" '
            f'data-rank="{o["rank"]}" data-first-bytes="{int(vals[0])}" data-last-bytes="{int(vals[-1])}" '
            f'fill="{color}" fill-opacity="0.85" stroke="{color}" d="M{" L".join(pts)} Z">'
            f"<title>{escape(o['display'])}: {_bytes(vals[-1])}</title></path>"
        )
        base = upper
    legend = "".join(
        f'<span class="key"><i style="background:{COLORS[k % len(COLORS)]}"></i>{escape(o["display"])}</span>'
        for k, o in enumerate(ops)
    )
    axis = (
        f'<text x="{PAD}" y="{H - PAD + 18}">{cks[0]["checkpoint_id"]}</text>'
        f'<text x="{W - PAD}" y="{H - PAD + 18}" text-anchor="end">{cks[-1]["checkpoint_id"]}</text>'
        f'<text x="{PAD - 4}" y="{y(top) + 4:.1f}" text-anchor="end">{_bytes(top)}</text>'
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>'
    )
    return (
        f'<svg class="stacked" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="full bytes per operator">{axis}{"".join(parts)}</svg><div class="legend">{legend}</div>'
    )


def _uploaded(job: dict[str, Any]) -> str:
    cks = job["checkpoints"]
    if not cks:
        return ""
    top = max(1, max(c["uploaded_bytes"] + c["reused_bytes"] for c in cks))
    bw = (W - 2 * PAD) / len(cks)
    bars = []
    for i, c in enumerate(cks):
        x0 = PAD + i * bw
        hu = (H - 2 * PAD) * c["uploaded_bytes"] / top
        hr = (H - 2 * PAD) * c["reused_bytes"] / top
        common = f'data-checkpoint="{c["checkpoint_id"]}" x="{x0 + 1:.1f}" width="{max(bw - 2, 1):.1f}"'
        bars.append(
            f'<rect class="uploaded" {common} data-bytes="{c["uploaded_bytes"]}" y="{H - PAD - hu:.1f}" '
            f'height="{hu:.1f}" fill="#e15759"><title>{c["checkpoint_id"]}: uploaded {_bytes(c["uploaded_bytes"])}'
            f"</title></rect>"
            f'<rect class="reused" {common} data-bytes="{c["reused_bytes"]}" y="{H - PAD - hu - hr:.1f}" '
            f'height="{hr:.1f}" fill="#bab0ac"><title>{c["checkpoint_id"]}: reused {_bytes(c["reused_bytes"])}'
            f"</title></rect>"
        )
    return (
        f'<svg class="uploads" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="uploaded and reused bytes per checkpoint">{"".join(bars)}</svg>'
        '<div class="legend"><span class="key"><i style="background:#e15759"></i>uploaded</span>'
        '<span class="key"><i style="background:#bab0ac"></i>reused</span></div>'
    )


def _ranking(job: dict[str, Any]) -> str:
    items = []
    for o in sorted(job["operators"], key=lambda o: o["rank"]):
        budget = "" if o["days_to_budget"] is None else f", budget in {o['days_to_budget']:.1f} d"
        items.append(
            f'<li data-rank="{o["rank"]}" data-operator="{escape(o["display"])}">'
            f"<b>{escape(o['display'])}</b> {_rate(o)}, full {_bytes(o['full_bytes'])}{budget}"
            + (f" <em>{escape(o['suspect'])}</em>" if o.get("suspect") else "")
            + "</li>"
        )
    return f'<ol class="ranking">{"".join(items)}</ol>'


def write_html(report: dict[str, Any]) -> str:
    """The page of a ``history --json`` document."""
    sections = []
    for job in report["jobs"]:
        title = f"job {job['job_id']}" if job["job_id"] else "savepoints"
        broken = [v for v in job["verdicts"] if v["broken"]]
        verdict = "".join(
            f'<p class="broken">broken: {escape(v["rule"])} by {escape(v["operator"] or "the job")}</p>'
            for v in broken
        )
        sections.append(
            f'<section class="job" data-job="{escape(job["job_id"] or "")}"><h2>{escape(title)}</h2>{verdict}'
            f"<h3>Growth ranking</h3>{_ranking(job)}"
            f"<h3>Full bytes per operator</h3>{_stacked(job)}"
            f"<h3>Uploaded vs reused per checkpoint</h3>{_uploaded(job)}</section>"
        )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>ckptctl history</title><style>'
        "body{font:14px sans-serif;margin:2em}svg text{font:11px sans-serif;fill:#444}"
        ".legend .key{margin-right:1em}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}"
        ".broken{color:#b00}</style></head><body>"
        f"<h1>ckptctl history {escape(report['root'])}</h1>{''.join(sections)}"
        "<script>for(const p of document.querySelectorAll('path.layer'))"
        "p.dataset.renderedHeight=p.getBBox().height.toFixed(1);"
        "document.body.dataset.rendered=document.querySelectorAll('svg').length;</script>"
        "</body></html>\n"
    )
