"""The family tables of README.md and docs/models.md, generated from the family table (:mod:`san.models.spec`), so
that a row is the one place a family is stated: its kind, its block as a formula, what each of the paper's variants
(Fig. 2) keeps of the block, its transformers classes and its notes. Torch-free.

A document quotes each table, by its name in :data:`TABLES`, in a generated block ``<!-- generated: NAME -->`` ...
``<!-- end -->``, which ``python -m san.report.readme sync`` rewrites with the table rendered from the family table
(``--check``: only list the documents that differ; the tests run it).

The formulas follow the ablations (:mod:`san.models.ablations`): a post-norm block is ``h = N1(x + Attn(x))``,
``y = N2(h + MLP(h))``; a block whose norms sit inside its branches is ``h = x + s Na(Attn(N1(x)))``,
``y = h + s Nm(MLP(N2(h)))`` with each norm present or not as the row's ``pre_norm_parts`` say and ``s`` the row's
branch multiplier; parallel blocks add both branches to ``x``. A mixture-of-experts layer is written ``MoE``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping

from san.models.spec import FAMILY_TABLE, VARIANTS, FamilyRow

#: the kinds of family, in the order the lists name them
KINDS = ("post-norm encoder", "pre-norm encoder", "causal decoder", "mixture-of-experts decoder", "image encoder")


def kind(row: FamilyRow) -> str:
    """A family's kind: post-norm or pre-norm encoder, causal decoder, mixture-of-experts decoder."""
    if row.modality == "image":
        return "image encoder"
    if row.experts_key is not None:
        return "mixture-of-experts decoder"
    if row.causal:
        return "causal decoder"
    return "pre-norm encoder" if row.pre_norm_parts is not None else "post-norm encoder"


def _branches(row: FamilyRow) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """The attention and MLP branches of a block whose norms sit inside them, as functions of their input."""
    norm_a, _, post_a, norm_m, _, post_m = row.pre_norm_parts or (None,) * 6
    shared = norm_a is not None and norm_a == norm_m
    n1, n2 = ("N", "N") if shared else ("N1", "N2")
    s = "s " if row.branch_multiplier else ""
    mlp = "MoE" if row.experts_key else "MLP"

    def attention(x: str) -> str:
        inner = f"Attn({n1}({x}))" if norm_a else f"Attn({x})"
        if row.layer_scale:
            return f"λ1 {inner}"
        return s + (f"Na({inner})" if post_a else inner)

    def feed_forward(h: str) -> str:
        inner = f"{mlp}({n2}({h}))" if norm_m else f"{mlp}({h})"
        if row.layer_scale:
            return f"λ2 {inner}"
        return s + (f"Nm({inner})" if post_m else inner)

    return attention, feed_forward


def block(row: FamilyRow) -> str:
    """The unmodified block of a family as a formula."""
    if row.pre_norm_parts is None:
        return "`h = N1(x + Attn(x))`, `y = N2(h + MLP(h))`"
    attention, feed_forward = _branches(row)
    sequential = f"`h = x + {attention('x')}`, `y = h + {feed_forward('h')}`"
    parallel = f"`y = x + {attention('x')} + {feed_forward('x')}`"
    if row.parallel_residual is True:
        return parallel
    if isinstance(row.parallel_residual, str):
        return f"{parallel} when the config's `{row.parallel_residual}` is true, else {sequential}"
    return sequential


def variants(row: FamilyRow) -> dict[str, str]:
    """What each variant computes of a block, as formulas (the ``transformer`` is :func:`block`)."""
    if row.pre_norm_parts is None:
        san, san_mlp, san_skip = "`N1(Attn(x))`", "`N2(MLP(N1(Attn(x))))`", "`N1(x + Attn(x))`"
    else:
        attention, feed_forward = _branches(row)
        a = attention("x")
        san, san_mlp, san_skip = f"`{a}`", f"`{feed_forward(a)}`", f"`x + {a}`"
    if row.without_mlp is not None:
        san, san_skip = (f"{row.without_mlp}, `h = {h.strip('`')}`" for h in (san, san_skip))
    return dict(zip(VARIANTS, (san, san_mlp, san_skip, block(row)), strict=True))


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def family_list(table: Mapping[str, FamilyRow] = FAMILY_TABLE) -> str:
    """The README's list of families, by kind, with their count."""
    groups = []
    for name in KINDS:
        members = [f"`{family}`" for family, row in table.items() if kind(row) == name]
        if members:
            listed = members[0] if len(members) == 1 else ", ".join(members[:-1]) + f" and {members[-1]}"
            groups.append(f"the {name}{'s' if len(members) > 1 else ''} {listed}")
    text = f"Families ({len(table)}): " + "; ".join(groups) + "."
    return textwrap.fill(text, width=120, break_long_words=False, break_on_hyphens=False) + "\n"


def family_table(table: Mapping[str, FamilyRow] = FAMILY_TABLE) -> str:
    """docs/models.md's table of the families: kind, transformers classes, block and notes."""
    rows = []
    for family, row in table.items():
        classes = ", ".join(f"`{c}`" for c in (row.config_class, row.model_class, row.lm_class) if c)
        rows.append([f"`{family}`", kind(row), classes, block(row), row.notes])
    return markdown(["family", "kind", "transformers classes", "block", "notes"], rows)


def variant_table(table: Mapping[str, FamilyRow] = FAMILY_TABLE) -> str:
    """docs/models.md's table of what each variant computes of each family's block."""
    rows = [[f"`{family}`", *list(variants(row).values())[:3]] for family, row in table.items()]
    return markdown(["family", *VARIANTS[:3]], rows)


#: the generated tables by the name of the documents' block that quotes them
TABLES: dict[str, Callable[[], str]] = {
    "family-list": family_list,
    "families": family_table,
    "variants": variant_table,
}
