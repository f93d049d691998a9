"""The instrumentation hooks as the hot paths call them: the same answers as pluggy's
hook caller (every implementation, newest first, None left out), without its machinery."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import pluggy
from runnel.plugins import hookimpl
from runnel.plugins.manager import load_plugin, plugin_manager
from runnel.plugins.instruments import instruments

class First:
    @hookimpl
    def runnel_job_running(self, job, delivery, headers):
        return ("first", job, headers)

class Silent:
    @hookimpl
    def runnel_job_running(self, delivery):
        return None

class Last:
    @hookimpl
    def runnel_job_running(self, job):
        return ("last", job)

for plugin in (First(), Silent(), Last()):
    load_plugin(plugin)
running = instruments().job_running
assert not isinstance(running, pluggy.HookCaller), running
got = running(job="j", delivery="d", headers={"h": "1"})
want = plugin_manager().hook.runnel_job_running(job="j", delivery="d", headers={"h": "1"})
print(got == want, [g[0] for g in got if isinstance(g, tuple)])

class Wrapper:
    @hookimpl(wrapper=True)
    def runnel_job_running(self, job):
        return (yield)

load_plugin(Wrapper())
print(isinstance(instruments().job_running, pluggy.HookCaller))
"""


def test_hooks_are_called_directly_with_pluggys_answers(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    direct, wrapped = done.stdout.splitlines()
    assert direct == "True ['last', 'first']"
    assert wrapped == "True"  # a wrapper keeps pluggy's caller
