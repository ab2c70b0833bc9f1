"""Results people can read: the dicts returned by ``Store.stats()``, ``KvCache.stats()``
and ``maintain()`` stay plain dicts (every key as documented) but print as tables.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Sequence

_TIERS = ("tier 0 (raw)", "tier 1 (8-bit)", "tier 2 (5-bit)", "tier 3 (3-bit)")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    )
    return "\n".join([line(header), "-" * (sum(widths) + 2 * (len(widths) - 1))] + [line(r) for r in rows])


class StoreStats(dict):
    """``Store.stats()`` / ``KvCache.stats()``: a dict (keys as documented there) whose
    ``repr`` is a table of blocks, bytes and compression per tier."""

    def __repr__(self) -> str:
        rows = []
        for t, name in enumerate(_TIERS):
            blocks = self["blocks"][t]
            payload = self["payload_bytes"][t]
            raw = self["raw_bytes"][t]
            ratio = f"{raw / payload:.2f}x" if payload else "-"
            file_bytes = self["usage"][t]["bytes"]
            rows.append([name, blocks, _size(payload), _size(raw), ratio, _size(file_bytes)])
        head = (
            f"<tensorvault stats: {self['tensors']} tensors, {sum(self['blocks'])} blocks, "
            f"{self['log_records']} log records; since open: {self['reads']} reads, "
            f"{self['writes']} writes, {self['migrations']} migrations, "
            f"{self['checksum_failures']} checksum failures>"
        )
        body = _table(["tier", "blocks", "stored", "as raw", "ratio", "file"], rows)
        return head + "\n" + body


class MaintainReport(dict):
    """``maintain()``: a dict (keys as documented there) plus ``summary``, every move of
    the step in one place: ``{"from_tier", "to_tier", "reason", "blocks"}`` per kind of
    move (reason ``"capacity"``, ``"cold"``, ``"hot"``, or ``"age"`` for a KV cache's age
    policy, whose ``from_tier`` is ``None``), and ``moved``, their total. Its ``repr`` is
    that summary as a table."""

    def __init__(self, raw: Dict[str, Any]) -> None:
        super().__init__(raw)
        counts: Counter = Counter(
            (m["from_tier"], m["to_tier"], m["reason"]) for m in raw.get("moves", [])
        )
        summary: List[Dict[str, Any]] = [
            {"from_tier": f, "to_tier": t, "reason": r, "blocks": n}
            for (f, t, r), n in sorted(counts.items())
        ]
        for t, n in enumerate(raw.get("age_moved") or []):
            if n:
                summary.append({"from_tier": None, "to_tier": t, "reason": "age", "blocks": n})
        self["summary"] = summary
        self["moved"] = sum(s["blocks"] for s in summary)

    def __repr__(self) -> str:
        head = (
            f"<tensorvault maintain: {self['scored']} blocks scored, {self['moved']} moved, "
            f"{self['deferred']} deferred, {self['over_capacity']} over capacity"
            f"{', %d held (values a colder tier cannot encode)' % len(self['held']) if self.get('held') else ''}>"
        )
        if not self["summary"]:
            return head

        def tier(t: Optional[int]) -> str:
            return "-" if t is None else f"tier {t}"

        rows = [[s["reason"], tier(s["from_tier"]), tier(s["to_tier"]), s["blocks"]] for s in self["summary"]]
        return head + "\n" + _table(["reason", "from", "to", "blocks"], rows)
