"""Plain-text tables for the printable records (analysis, plan, explain). Imports no TensorFlow."""


def format_table(rows):
    """Left-aligned columns, a dashed rule under the first (header) row."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
