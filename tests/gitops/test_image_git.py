"""The container image has git: the hand-off runs Debian's git in the web process."""

from __future__ import annotations

import re

from tests.test_deploy import dockerfile_instructions


def test_the_runtime_stage_installs_debians_git() -> None:
    instructions = dockerfile_instructions()
    runtime = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    runs = [rest for keyword, rest in instructions[runtime:] if keyword == "RUN"]
    installs = [run for run in runs if re.search(r"apt-get install .*\bgit\b", run)]
    assert installs, "the runtime stage must apt-get install git"
    assert "--no-install-recommends" in installs[0] and "rm -rf /var/lib/apt/lists" in installs[0]
