"""import_object ("MODULE:NAME") and autodiscover (import modules by glob)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runnel import App
from runnel.discovery import autodiscover
from runnel.exceptions import RunnelError
from runnel.imports import ImportTargetError, import_object


@pytest.fixture
def modules(tmp_path, uid, monkeypatch, forget_modules):
    """A directory on sys.path; write(name, source) adds a module forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        forget_modules.append(name.split(".")[0])
        return name

    write.uid = uid
    return write


def test_import_object_finds_nested_attributes(modules):
    mod = modules(
        f"unit_target_{modules.uid}",
        "class Box:\n    class Inner:\n        value = 41\napp = object()\n",
    )
    assert import_object(f"{mod}:Box.Inner.value") == 41
    assert import_object(f"{mod}:app") is sys.modules[mod].app
    assert import_object("os.path:join") is __import__("os").path.join


@pytest.mark.parametrize("target", ["no_colon", "mod:", ":attr", ":", ""])
def test_not_module_colon_name(target):
    with pytest.raises(ImportTargetError) as info:
        import_object(target)
    message = str(info.value)
    assert "MODULE:NAME" in message and "\n" not in message
    assert isinstance(info.value, RunnelError)


def test_missing_module(uid):
    with pytest.raises(ImportTargetError) as info:
        import_object(f"no_such_module_{uid}:app")
    assert str(info.value) == f"cannot import module 'no_such_module_{uid}'"


def test_missing_submodule(modules):
    pkg = f"unit_pkg_{modules.uid}"
    modules(f"{pkg}.__init__", "")
    with pytest.raises(ImportTargetError) as info:
        import_object(f"{pkg}.nope:app")
    assert str(info.value) == f"cannot import module '{pkg}.nope'"


def test_missing_attribute(modules):
    mod = modules(f"unit_attr_{modules.uid}", "x = 1\n")
    with pytest.raises(ImportTargetError) as info:
        import_object(f"{mod}:y")
    assert str(info.value) == f"module '{mod}' has no attribute 'y'"
    with pytest.raises(ImportTargetError) as info:
        import_object(f"{mod}:x.nope")
    assert "\n" not in str(info.value) and "x.nope" in str(info.value)


def test_error_inside_the_target_module_is_not_disguised(modules):
    """A module that exists but whose own imports fail: the real error comes through."""
    mod = modules(f"unit_broken_{modules.uid}", f"import other_missing_{modules.uid}\n")
    with pytest.raises(ModuleNotFoundError, match=f"other_missing_{modules.uid}"):
        import_object(f"{mod}:app")
    mod2 = modules(f"unit_raises_{modules.uid}", "raise RuntimeError('boom at import')\n")
    with pytest.raises(RuntimeError, match="boom at import"):
        import_object(f"{mod2}:app")


def test_missing_dependency_whose_name_prefixes_the_module(modules):
    missing = f"unit_dep_{modules.uid}"
    mod = modules(f"{missing}_extra", f"import {missing}\n")
    with pytest.raises(Exception) as info:
        import_object(f"{mod}:app")
    assert f"'{missing}'" in str(info.value)


# autodiscover.


@pytest.fixture
def project(tmp_path, uid, forget_modules) -> tuple[Path, str]:
    """tmp/pkg_<uid>/{tasks_a,tasks_b,other}.py and tmp/pkg_<uid>/sub/{__init__,tasks_c}.py."""
    pkg = f"disc_{uid}"
    forget_modules.append(pkg)
    root = tmp_path / pkg
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for name in ("tasks_a", "tasks_b", "other"):
        (root / f"{name}.py").write_text(f"IMPORTED = {name!r}\n")
    (root / "sub" / "__init__.py").write_text("IMPORTED = 'sub'\n")
    (root / "sub" / "tasks_c.py").write_text("IMPORTED = 'tasks_c'\n")
    (root / "tasks_data.txt").write_text("not python")
    return tmp_path, pkg


def test_autodiscover_imports_matching_modules(project):
    root, pkg = project
    imported = autodiscover(f"{pkg}/tasks_*", root=str(root))
    assert imported == [f"{pkg}.tasks_a", f"{pkg}.tasks_b"]  # not the .txt file
    assert sys.modules[f"{pkg}.tasks_a"].IMPORTED == "tasks_a"
    assert f"{pkg}.other" not in sys.modules


def test_autodiscover_recursive_glob_and_packages(project):
    root, pkg = project
    assert autodiscover(f"{pkg}/**/tasks_*.py", root=str(root)) == [
        f"{pkg}.sub.tasks_c",
        f"{pkg}.tasks_a",
        f"{pkg}.tasks_b",
    ]
    assert autodiscover(f"{pkg}/sub/__init__.py", root=str(root)) == [f"{pkg}.sub"]
    assert autodiscover(f"{pkg}/nothing_*.py", root=str(root)) == []


def test_app_autodiscover_uses_the_setting_and_cwd(project, monkeypatch):
    root, pkg = project
    monkeypatch.chdir(root)
    app = App(name="u", redis_url="redis://127.0.0.1:1", autodiscover=f"{pkg}/other.py")
    assert app.autodiscover() == [f"{pkg}.other"]
    assert sys.modules[f"{pkg}.other"].IMPORTED == "other"
    assert App(name="u", redis_url="redis://127.0.0.1:1").autodiscover() == []
