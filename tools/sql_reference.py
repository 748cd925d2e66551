"""Generate the SQL reference (docs/reference/sql.md) from the extension script.

Every public function of schema `broker` (a name not starting with `_`) gets one section: its
signature, its parameters with types and defaults, what it returns, the text of its COMMENT ON,
the description of its header comment, the errors with their SQLSTATEs (the header's `Errors:`
lines) and its example (the header's `Example:` lines). Tables and views get their COMMENT ON and
one row per commented column. The script is parsed with pglast (libpg_query), so signatures are
read the way PostgreSQL reads them, not by pattern.

    python tools/sql_reference.py            # write docs/reference/sql.md
    python tools/sql_reference.py --check    # exit 1 when the committed file is stale
"""
from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from pglast import ast, parser
from pglast.enums import FunctionParameterMode, ObjectType
from pglast.stream import RawStream

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reference" / "sql.md"
HEADER_RULE = re.compile(r"^-- -{20,}$")
CREATE = re.compile(r"^CREATE\s", re.M)
SECTION = re.compile(r"^(Errors|Example|Calls|Tables):\s?(.*)$")


@dataclass
class Function:
    name: str
    params: list[tuple[str, str, str | None]]       # (name, type, default) of the IN parameters
    outs: list[tuple[str, str]]                    # OUT / TABLE columns
    returns: str
    comment: str = ""
    description: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    example: list[str] = field(default_factory=list)


def _type(node: ast.TypeName) -> str:
    return RawStream()(node)


def _script() -> Path:
    control = (ROOT / "pgsql_broker.control").read_text()
    version = re.search(r"default_version\s*=\s*'([^']+)'", control).group(1)
    return ROOT / "extension" / f"pgsql_broker--{version}.sql"


def _header_before(text: str, offset: int) -> list[str]:
    """The lines of the `-- ----` delimited comment block that ends right before offset."""
    lines = text[:offset].rstrip("\n").split("\n")
    if not lines or not HEADER_RULE.match(lines[-1].strip()):
        return []
    block: list[str] = []
    for line in reversed(lines[:-1]):
        if HEADER_RULE.match(line.strip()):
            break
        block.append(line)
    return [line[3:] if line.startswith("-- ") else line.lstrip("-") for line in reversed(block)]


def _split_header(fn: Function, header: list[str]) -> None:
    part = "description"
    for line in header[1:]:                        # header[0] is "Function: name(...)"
        m = SECTION.match(line.strip())
        if m:
            part = m.group(1).lower()
            line = m.group(2)
            if not line:
                continue
        if part == "description":
            fn.description.append(line.rstrip())
        elif part == "errors":
            fn.errors.append(line.strip())
        elif part == "example":
            fn.example.append(line.rstrip())


def _function(stmt: ast.CreateFunctionStmt) -> Function:
    params, outs = [], []
    for p in stmt.parameters or ():
        mode = p.mode
        if mode in (FunctionParameterMode.FUNC_PARAM_OUT, FunctionParameterMode.FUNC_PARAM_TABLE):
            outs.append((p.name, _type(p.argType)))
            continue
        default = RawStream()(p.defexpr) if p.defexpr is not None else None
        params.append((p.name, _type(p.argType), default))
        if mode == FunctionParameterMode.FUNC_PARAM_INOUT:
            outs.append((p.name, _type(p.argType)))
    returns = _type(stmt.returnType) if stmt.returnType is not None else "void"
    if stmt.returnType is not None and stmt.returnType.setof and outs:
        returns = "SETOF record"
    return Function(name=stmt.funcname[-1].sval, params=params, outs=outs, returns=returns)


def collect() -> tuple[list[Function], list[tuple[str, str, list[tuple[str, str]]]]]:
    text = _script().read_text()
    # psql meta-commands are not SQL
    sql = "\n".join("" if line.startswith("\\") else line for line in text.split("\n"))
    functions: dict[tuple[str, int], Function] = {}
    order: list[tuple[str, int]] = []
    relations: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for raw in parser.parse_sql(sql):
        stmt = raw.stmt
        if isinstance(stmt, ast.CreateFunctionStmt) and stmt.funcname[0].sval == "broker" \
                and not stmt.funcname[-1].sval.startswith("_") and not stmt.is_procedure:
            fn = _function(stmt)
            # a statement's location includes the comments before it: find its first keyword
            start = CREATE.search(sql, raw.stmt_location or 0).start()
            _split_header(fn, _header_before(sql, start))
            key = (fn.name, len(fn.params))
            functions[key] = fn
            order.append(key)
        elif isinstance(stmt, ast.CommentStmt):
            if stmt.objtype == ObjectType.OBJECT_FUNCTION:
                obj = stmt.object
                names = [n.sval for n in obj.objname]
                key = (names[-1], len(obj.objargs or ()))
                if names[0] == "broker" and key in functions:
                    functions[key].comment = stmt.comment or ""
            elif stmt.objtype in (ObjectType.OBJECT_TABLE, ObjectType.OBJECT_VIEW):
                names = [n.sval for n in stmt.object]
                if names[0] == "broker":
                    relations.setdefault(names[1], ("", []))
                    relations[names[1]] = (stmt.comment or "", relations[names[1]][1])
            elif stmt.objtype == ObjectType.OBJECT_COLUMN:
                names = [n.sval for n in stmt.object]
                if names[0] == "broker" and names[1] in relations:
                    relations[names[1]][1].append((names[2], stmt.comment or ""))
    return [functions[k] for k in order], [(name, c, cols) for name, (c, cols) in relations.items()]


def _signature(fn: Function) -> str:
    args = []
    for name, typ, default in fn.params:
        args.append(f"{name} {typ}" + (f" DEFAULT {default}" if default is not None else ""))
    head = f"broker.{fn.name}("
    if not args:
        return head + ")"
    return head + "\n    " + ",\n    ".join(args) + "\n)"


def _markdown(lines: list[str]) -> list[str]:
    """Header prose as Markdown: paragraphs at the base indentation, `* ` bullets and indented
    `term   meaning` lines as list items, deeper lines continuing the item above them."""
    text = [line for line in lines]
    while text and not text[-1].strip():
        text.pop()
    indents = [len(line) - len(line.lstrip()) for line in text if line.strip()]
    if not indents:
        return []
    base = min(indents)
    blocks: list[str] = []
    item_indent: int | None = None
    for line in text:
        if not line.strip():
            blocks.append("")
            item_indent = None
            continue
        indent, body = len(line) - len(line.lstrip()), line.strip()
        if item_indent is not None and indent > item_indent:
            blocks[-1] += " " + body
        elif body.startswith("* ") or indent > base:
            item_indent = indent
            body = body[2:] if body.startswith("* ") else body
            term = re.match(r"^(\S+)\s{2,}(.*)$", body)
            blocks.append(f"- `{term.group(1)}`: {term.group(2)}" if term else f"- {body}")
        elif blocks and blocks[-1] and not blocks[-1].startswith("- "):
            blocks[-1] += " " + body
        else:
            if blocks and blocks[-1].startswith("- "):
                blocks.append("")
            blocks.append(body)
            item_indent = None
    out: list[str] = []
    for block in blocks:
        if block.startswith("- ") and out and out[-1] and not out[-1].startswith("- "):
            out.append("")
        out.append(block)
    return out + [""]


def render() -> str:
    functions, relations = collect()
    out = ["# SQL reference", "",
           "Generated by `tools/sql_reference.py` from the `COMMENT ON` text and the header comment of",
           "each object in the extension script; do not edit (`make docs` rewrites it, and a test fails",
           "when it is stale). Only the public objects are listed: names starting with `_` are internal.",
           "", "## Functions", ""]
    for fn in functions:
        out += [f"### {fn.name}", "", fn.comment, "", "```sql", _signature(fn), "```", ""]
        if fn.params:
            out += ["| parameter | type | default |", "|---|---|---|"]
            out += [f"| `{n}` | `{t}` | {f'`{d}`' if d is not None else '(required)'} |" for n, t, d in fn.params]
            out.append("")
        if fn.outs:
            returns = "a set of rows" if fn.returns == "SETOF record" else "one row"
            out += [f"**Returns** {returns}: " + ", ".join(f"`{n}` `{t}`" for n, t in fn.outs) + ".", ""]
        else:
            out += [f"**Returns** `{fn.returns}`.", ""]
        out += _markdown(fn.description)
        if fn.errors:
            out += ["**Errors**: " + " ".join(fn.errors), ""]
        if fn.example:
            out += ["**Example**", "", "```sql", *textwrap.dedent("\n".join(fn.example)).strip("\n").split("\n"),
                    "```", ""]
    out += ["## Tables", ""]
    for name, comment, columns in relations:
        out += [f"### {name}", "", comment, ""]
        if columns:
            out += ["| column | meaning |", "|---|---|"]
            out += [f"| `{c}` | {text.replace('|', '&#124;')} |" for c, text in columns]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--check", action="store_true", help="exit 1 when docs/reference/sql.md is stale")
    opts = args.parse_args(argv)
    text = render()
    if opts.check:
        functions, _ = collect()
        missing = [f.name for f in functions if not f.comment or not f.example]
        if missing:
            print("public functions without COMMENT ON or an Example: in their header: " + ", ".join(missing),
                  file=sys.stderr)
            return 1
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run make docs and commit it", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
