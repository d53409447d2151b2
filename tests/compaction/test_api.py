import ast
import json
import subprocess
import sys
from pathlib import Path

import compaction

PACKAGE = Path(compaction.__file__).parent


def test_all_is_sorted_and_complete():
    assert compaction.__all__ == sorted(compaction.__all__)
    public = {
        name
        for name, value in vars(compaction).items()
        if not name.startswith("_") and not isinstance(value, type(compaction))
    }
    assert set(compaction.__all__) == public
    for name in compaction.__all__:
        assert getattr(compaction, name) is not None


def test_every_public_name_has_a_docstring():
    for name in compaction.__all__:
        value = getattr(compaction, name)
        if callable(value):
            assert value.__doc__, name


def test_engine_imports_nothing_from_django_or_the_web_layer():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                assert root not in {"django", "hermes_web", "settings"}, f"{path}: {name}"


def test_litellm_is_imported_only_by_the_summarizer_module():
    for path in PACKAGE.rglob("*.py"):
        if "litellm" in path.read_text() and path.name != "summarizer.py":
            tree = ast.parse(path.read_text())
            imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
            for node in imports:
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                assert "litellm" not in names, path


def test_importing_the_engine_does_not_import_litellm():
    code = "import sys, compaction; compaction.compact([]); print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_contract_example_runs_and_report_is_json():
    messages = compaction.generate_conversation(120, seed=3)
    result = compaction.compact(
        messages,
        config=compaction.CompactionConfig(context_length=200_000),
        summarizer=None,
        now=None,
    )
    assert isinstance(result.messages, list)
    json.dumps(result.report.to_dict())
