"""The task seam: only ``lucidyolo/tasks/`` may name a task.

A module elsewhere that compares a value against a task name or alias
(``task == "det"``, ``name in ("seg", "obb")``) or keeps a table keyed by task
names has grown a per-task branch the registry should own. The scan is over the
AST of every module, so strings in docstrings and messages do not count.

A field name (``"keypoints" in fields``) is not a task name, so this scan lets
it pass; the later scans allow built-in field names only in the tasks (which
define and declare them): readers, checks and plans loop over the task's fields
and ask their rules. The last scan reads every string and attribute read, not
only comparisons, with two documented exceptions (:data:`NAME_ALLOWED`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

import lucidyolo

PACKAGE = Path(lucidyolo.__file__).parent
TASK_WORDS = {"det", "detect", "seg", "segment", "obb", "oriented", "pose", "keypoints"}
"""Names and aliases of the built-in tasks (a plugin's names never appear in lucidyolo)."""

def _is_task_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in TASK_WORDS


def _offences(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                if isinstance(op, ast.Eq | ast.NotEq) and (_is_task_word(left) or _is_task_word(right)):
                    lines.append(node.lineno)
                # `task in ("seg", "obb")`; `"keypoints" in fields` (a field name on the left) is fine
                listed = isinstance(right, ast.Tuple | ast.List | ast.Set) and any(_is_task_word(e) for e in right.elts)
                if isinstance(op, ast.In | ast.NotIn) and listed:
                    lines.append(node.lineno)
        if isinstance(node, ast.Dict) and sum(_is_task_word(k) for k in node.keys if k is not None) >= 2:
            lines.append(node.lineno)  # a per-task table
    return lines


def _scan() -> dict[str, list[int]]:
    return _scan_outside(("tasks/",), (), _offences)


def test_no_module_outside_tasks_branches_on_a_task_name():
    found = _scan()
    assert not found, f"task-name branches outside lucidyolo/tasks/ (file: lines): {found}"


def test_the_scan_catches_each_kind_of_branch():
    code = 'a = task == "det"\nb = name in ("seg", "x")\nc = {"obb": 1, "pose": 2}\nd = "keypoints" in fields\n'
    assert _offences(ast.parse(code)) == [1, 2, 3]


DECODE_PATH_WORDS = {"e2e", "nms"}
"""The built-in tasks' decode paths: a task declares its own (``TaskSpec.decode_paths``)."""

DECODE_PATH_ALLOWED = {"models/inference_view.py"}
"""The dual head's inference view, which the built-in tasks name as their ``inference_view`` hook
(``tasks/dual_head.py``): it serves the paths of the model it belongs to."""


def _decode_path_literals(tree: ast.AST) -> list[int]:
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in DECODE_PATH_WORDS and id(node) not in docstrings)


def _scan_outside(rooms: tuple[str, ...], allowed: Collection[str], scan: Callable[[ast.AST], list[int]]) -> dict[str, list[int]]:
    """``{module: lines}`` of every module outside ``rooms`` (and not ``allowed``) where ``scan`` finds something."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(rooms) or rel in allowed:
            continue
        lines = scan(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    return found


def test_no_module_outside_tasks_names_a_decode_path():
    found = _scan_outside(("tasks/",), DECODE_PATH_ALLOWED, _decode_path_literals)
    assert not found, f"decode paths named outside lucidyolo/tasks/ (read TaskSpec.decode_paths; file: lines): {found}"


def test_the_decode_path_scan_ignores_docstrings():
    code = '"""e2e"""\ndef f(path="e2e"):\n    """nms"""\n    return "nms"\n'
    assert _decode_path_literals(ast.parse(code)) == [2, 4]


FIELD_WORDS = {"polygons", "rboxes", "keypoints", "visibility"}
"""The built-in tasks' instance fields: code outside ``structures/`` (which defines them) and the
tasks (which declare them) loops over the task's fields and asks their rules instead."""

FIELD_ALLOWED = {
    "metrics/coco_eval.py": "pycocotools' iouType 'keypoints' and its annotation key are COCO's words",
    "metrics/coco_random_case.py": "random COCO cases for the protocol test, in COCO's own keys",
}


def _field_branches(tree: ast.AST) -> list[int]:
    """A comparison with a field name (``"keypoints" in fields``), a literal tuple / list / set of field
    names (``return ("rboxes",)``) or a table keyed by one."""
    word = lambda n: isinstance(n, ast.Constant) and n.value in FIELD_WORDS  # noqa: E731
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(word(o) for o in (node.left, *node.comparators)):
            lines.append(node.lineno)
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and any(word(e) for e in node.elts):
            lines.append(node.lineno)
        if isinstance(node, ast.Dict) and any(word(k) for k in node.keys if k is not None):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_module_outside_structures_and_tasks_branches_on_a_built_in_field():
    found = _scan_outside(("tasks/", "structures/"), FIELD_ALLOWED, _field_branches)
    assert not found, f"built-in field names outside structures/ and tasks/ (ask the field's rules; file: lines): {found}"


def test_the_field_scan_catches_each_kind_of_branch():
    code = ('a = "keypoints" in fields\nb = ("rboxes",)\nc = {"polygons": 1}\nd = f.get("rboxes")\n'
            'e = x == "visibility"\n')
    assert _field_branches(ast.parse(code)) == [1, 2, 3, 5]


NAME_WORDS = TASK_WORDS | FIELD_WORDS | {"crowd"}
"""Every built-in task name and alias and every built-in field and attribute name."""

NAME_ALLOWED = {
    "metrics/coco_eval.py": "pycocotools' iouType 'keypoints' and the results' 'keypoints' key are COCO's words",
    "api/prediction.py": "the Python API's familiar views (.obb, .keypoints) read the predict dicts' conventional "
                         "keys: a task whose predictions carry them gets the views, whatever its name",
}


def _names_read(tree: ast.AST) -> list[int]:
    """A string (not a docstring) or an attribute read (``t.rboxes``) that is a built-in task or field name."""
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return sorted({
        node.lineno for node in ast.walk(tree)
        if (isinstance(node, ast.Constant) and node.value in NAME_WORDS and id(node) not in docstrings)
        or (isinstance(node, ast.Attribute) and node.attr in NAME_WORDS)
    })


def test_nothing_outside_tasks_names_a_built_in_task_or_field():
    """Strings and attribute reads, not only comparisons: a field's rules, codecs and scene, a task's presets
    and parity check live in ``lucidyolo/tasks/<task>/``; the rest asks the task's roles and its fields."""
    found = _scan_outside(("tasks/",), NAME_ALLOWED, _names_read)
    assert not found, f"built-in task or field names outside lucidyolo/tasks/ (file: lines): {found}"


def test_the_name_scan_catches_strings_and_attribute_reads():
    code = ('"""rboxes"""\nx = t.rboxes\ny = {"polygons": 1}\nz = gt.get("crowd")\n'
            'def f():\n    """det"""\n    return "seg"\nw = t.boxes\n')
    assert _names_read(ast.parse(code)) == [2, 3, 4, 7]
