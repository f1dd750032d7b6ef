"""docs/architecture.md names only what exists. Its rules, kept simple so that the doc can change:

- the folder tree (its first fenced block): a line whose first words, before a gap of two spaces,
  are names (``x.py``, ``dir/``) at an indent under 16 spaces is an entry, nested by its indent
  (two spaces a level); every entry must exist, and every ``x.py`` its description names is looked
  for in the entry's folder (a name with a slash: from the repository's root), continuation lines
  (deeper) going with the entry above;
- a span in backticks holding a slash and only path characters (``services/store/live.py``,
  ``services/execution``) is a path from the repository's root: it must exist;
- a span in backticks that is a dotted name (anything from its first ``(`` on left out) rooted at
  ``services``, ``vit_core`` or a module or package of services/ (``app.runs.find``,
  ``store.live.LiveRecord.open``) is a module, then a name defined at its top (a def, a class,
  an assignment or an import), then, under a class, a name defined in the class's body. Modules
  are parsed, never imported. Other spans (``Sweep.spec``, ``vitsweep.cell``, flags) are
  not checked.
"""

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
ENTRY_INDENT = 16  # deeper lines of the tree continue the entry above
NAME = re.compile(r"^[\w.-]+(\.py|/)$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
PATH = re.compile(r"^[\w./-]*/[\w./-]*$")
ROOTS = {"services", "vit_core"} | {p.stem for p in (ROOT / "services").iterdir() if p.suffix == ".py" or p.is_dir()}


def tree_paths() -> list[str]:
    """Every path the folder tree names, from the repository's root."""
    block = DOC.split("```", 2)[1].splitlines()[1:]
    folders: list[str] = []  # the folder of each nesting level
    found, here = [], ""
    for line in block:
        indent, words = len(line) - len(line.lstrip()), line.split()
        names = []
        if indent < ENTRY_INDENT:
            for word in re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split():
                if not NAME.match(word):
                    break
                names.append(word)
        if names:
            level = indent // 2
            folders = folders[:level]
            parent = "".join(folders)
            found += [parent + name for name in names]
            here = parent + names[0] if names[0].endswith("/") else parent
            if names[0].endswith("/"):
                folders.append(names[0])
        described = re.findall(r"[\w/]+\.py\b", " ".join(words[len(names) :]))
        found += [name if "/" in name else here + name for name in described]
    return found


def spans() -> list[str]:
    """Every span in backticks outside fenced blocks."""
    prose = "".join(DOC.split("```")[0::2])
    return re.findall(r"`([^`\n]+)`", prose)


@cache
def module_of(dotted: str) -> tuple[Path, list[str]] | None:
    """(the file of the longest module prefix of ``dotted``, the names after it); None: no module."""
    parts = dotted.split(".")
    parts = parts if parts[0] in ("services", "vit_core") else ["services", *parts]
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        for file in (base.with_suffix(".py"), base / "__init__.py"):
            if file.is_file():
                return file, parts[cut:]
    return None


def defined(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module's or a class's body defines, each with its node."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names |= {t.id: node for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0]: node for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= defined(node.body)
    return names


def dotted_names() -> list[str]:
    """The spans that are dotted names rooted at services, vit_core or a part of services."""
    names = [span.split("(")[0] for span in spans()]
    return sorted({name for name in names if DOTTED.match(name) and name.split(".")[0] in ROOTS})


@pytest.mark.parametrize("path", sorted(set(tree_paths())))
def test_every_path_of_the_tree_exists(path):
    assert (ROOT / path).exists(), f"docs/architecture.md's tree names {path}, which does not exist"


@pytest.mark.parametrize("path", sorted({span for span in spans() if PATH.match(span)}))
def test_every_path_in_backticks_exists(path):
    assert (ROOT / path).exists(), f"docs/architecture.md names `{path}`, which does not exist"


@pytest.mark.parametrize("dotted", dotted_names())
def test_every_dotted_name_is_defined(dotted):
    found = module_of(dotted)
    assert found is not None, f"`{dotted}`: no such module"
    file, names = found
    body = ast.parse(file.read_text()).body
    for name in names:
        scope = defined(body)
        assert name in scope, f"`{dotted}`: {name} is not defined in {file.relative_to(ROOT)}"
        node = scope[name]
        if not isinstance(node, ast.ClassDef):
            assert name == names[-1], f"`{dotted}`: {name} in {file.relative_to(ROOT)} is no class to look into"
            break
        body = node.body


def test_the_rules_find_what_the_doc_names():
    """The tree and the spans are read at all (a doc reformatted past these rules would check nothing)."""
    assert "services/store/live.py" in tree_paths() and "vit_core/training/loop.py" in tree_paths()
    assert "app.runs.find" in dotted_names() and "store.state.latest_sweep" in dotted_names()
