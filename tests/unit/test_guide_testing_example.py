"""The example of docs/guide.md's "Testing your app" runs as written: it is copied into a
file of its own and run by pytest in a subprocess, as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).parents[2] / "docs" / "guide.md"


def example() -> str:
    text = GUIDE.read_text()
    section = text[text.index("## Testing your app") :]
    start = section.index("```python\n# test_shop.py\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


def test_the_guides_testing_example_passes(tmp_path: Path) -> None:
    (tmp_path / "test_shop.py").write_text(example())
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
