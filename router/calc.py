"""The one calculator: every ratio and metric is a formula over vocabulary measures (``kb.core.measures.METRICS``,
one measure over another a question states, or a formula the question defines), evaluated by ``evaluate``.
How a term is valued is the caller's: ``router.metrics`` reads one company's fiscal years, ``router.facts``
each period a report prints (across companies); the arithmetic and its definitions are here only.

Formula language: ``v(c)`` the measure in the period (``opt(c)``: 0 when the statements print no such line),
``avg(c)`` its mean over the period's start and end balances, ``chg(c)`` its change between them, ``abs(x)``,
numbers, ``+ - * /`` and parentheses.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import msgspec

from kb.core.measures import CONCEPT_BY_NAME, METRIC_BY_NAME, Measure


class Term(msgspec.Struct, frozen=True):
    """One input of a formula: a measure in the asked period (``v``, ``opt``), averaged with the balance a
    year before (``avg``) or changed from it (``chg``); ``years`` when the question states them ("between
    FY2019 and FY2020")."""

    fn: str
    concept: str
    years: tuple[int, ...] = ()


class Formula(msgspec.Struct, frozen=True):
    """A parsed formula: the expression with its terms as names ``t0``, ``t1``, … and what they stand for."""

    name: str
    label: str
    expr: str
    terms: dict[str, Term]
    unit: str  # "%" | "x" | "days" | "money"
    defined: bool = False  # stated by the question

    @property
    def per_year(self) -> bool:
        """A formula over a year's days (``365 * …``): computed for twelve-month periods only."""
        return bool(re.search(r"\b36[05]\b", self.expr))

    @property
    def one_over_another(self) -> bool:
        """One measure over another of the same period (a margin, a turnover, a return): a plain ratio."""
        return bool(re.fullmatch(r"t0 / t1( \* 100)?", self.expr)) and all(
            t.fn in ("v", "avg") and not t.years for t in self.terms.values())


_TERM = re.compile(r"\b(v|opt|avg|chg)\((\w+)\)")


def catalog_formula(m: Measure) -> Formula:
    """A catalogue row as a formula (its terms named ``t0``, ``t1``, …)."""
    terms: dict[str, Term] = {}

    def term(match: re.Match[str]) -> str:
        key = f"t{len(terms)}"
        terms[key] = Term(match.group(1), match.group(2))
        return key

    return Formula(m.name, m.label, _TERM.sub(term, m.formula), terms, m.unit)


def quotient_name(numerator: str, denominator: str, percent: bool) -> str:
    """How a typed question names one vocabulary measure over another: "a / b", "a / b * 100" in percent."""
    return f"{numerator} / {denominator}" + (" * 100" if percent else "")


def quotient(name: str) -> Formula | None:
    """The formula a ``quotient_name`` states, when both are vocabulary measures (else None)."""
    percent = name.endswith(" * 100")
    parts = name.removesuffix(" * 100").split(" / ")
    if len(parts) != 2 or not all(p in CONCEPT_BY_NAME for p in parts):
        return None
    num, den = CONCEPT_BY_NAME[parts[0]], CONCEPT_BY_NAME[parts[1]]
    return Formula(name, f"{num.label} {'as a % of' if percent else 'to'} {den.label}",
                   "t0 / t1 * 100" if percent else "t0 / t1", {"t0": Term("v", num.name), "t1": Term("v", den.name)},
                   "%" if percent else "x")


def standard(kind: str, name: str) -> Formula | None:
    """The formula of a measure the typed question names: a catalogue metric or one measure over another."""
    if kind == "metric" and name in METRIC_BY_NAME:
        return catalog_formula(METRIC_BY_NAME[name])
    if kind == "formula":
        return quotient(name)
    return None


def concepts(f: Formula) -> tuple[str, ...]:
    """The vocabulary measures a formula reads, in order."""
    return tuple(dict.fromkeys(t.concept for t in f.terms.values()))


def check(node: ast.AST, names: set[str]) -> None:
    """Only arithmetic over numbers and the formula's own terms (``abs`` and the term functions)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in names and n.id != "abs":
            raise ValueError(n.id)
        if not isinstance(n, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.Load,
                              ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd)):
            raise ValueError(type(n).__name__)


_OPS: dict[type, Callable[[float, float], float | None]] = {
    ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
    ast.Div: lambda x, y: x / y if y else None}


def evaluate(formula: Formula, term_value: Callable[[Term], float | None]) -> float | None:
    """The formula's value, each term valued by ``term_value``; None when a term has no value or a divisor is
    zero (nothing is computed from what is not there)."""

    def walk(node: ast.AST) -> float | None:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            return term_value(formula.terms[node.id])
        if isinstance(node, ast.UnaryOp):
            x = walk(node.operand)
            return None if x is None else (-x if isinstance(node.op, ast.USub) else x)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs":
            x = walk(node.args[0])
            return None if x is None else abs(x)
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            return None if a is None or b is None else _OPS[type(node.op)](a, b)
        raise ValueError(f"unsupported formula node {type(node).__name__}")

    return walk(ast.parse(formula.expr, mode="eval"))
