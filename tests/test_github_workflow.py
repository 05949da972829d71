"""mountscripts/github-actions.yml: a workflow GitHub accepts, doing what docs/containers.md says.

Schema-level checks written from GitHub's workflow syntax reference (the keys a workflow, a job, a
container and a step may have; a step either uses an action or runs a script), then what this
workflow promises: a job on the runner and one in a container with what FUSE needs; each checks
out, installs tracefs-fuse alone (no test or bench extras) and runs the tests under
``tracefs-fuse run``, not as root; every script is valid bash.

YAML 1.1, which PyYAML reads, takes a bare ``on`` key for ``true``; GitHub reads it as ``on``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = Path(__file__).parents[1] / "mountscripts" / "github-actions.yml"

WORKFLOW_KEYS = {"name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs"}
JOB_KEYS = {"name", "permissions", "needs", "if", "runs-on", "environment", "concurrency",
            "outputs", "env", "defaults", "steps", "timeout-minutes", "strategy",
            "continue-on-error", "container", "services"}
CONTAINER_KEYS = {"image", "credentials", "env", "ports", "volumes", "options"}
STEP_KEYS = {"id", "if", "name", "uses", "run", "working-directory", "shell", "with", "env",
             "continue-on-error", "timeout-minutes"}
EVENTS = {"push", "pull_request", "pull_request_target", "workflow_dispatch", "schedule",
          "workflow_call", "merge_group", "release"}
ACTION = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w.-]+$")


def load() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    if True in doc:  # YAML 1.1's reading of "on"
        doc["on"] = doc.pop(True)
    return doc


WORKFLOW_DOC = load()
JOBS: dict[str, dict[str, Any]] = WORKFLOW_DOC["jobs"]


def scripts(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def tracefs_fuse_run(job: dict[str, Any]) -> list[str]:
    """The words of the job's command line that runs ``tracefs-fuse run``."""
    for script in scripts(job):
        words = shlex.split(script.replace("\\\n", " "))
        if any(w.endswith("/tracefs-fuse") for w in words) and "run" in words:
            return words
    raise AssertionError("no step runs tracefs-fuse run")


def test_workflow_keys() -> None:
    assert set(WORKFLOW_DOC) <= WORKFLOW_KEYS
    assert {"on", "jobs"} <= set(WORKFLOW_DOC)
    assert set(WORKFLOW_DOC["on"]) <= EVENTS
    assert {"push", "pull_request"} <= set(WORKFLOW_DOC["on"])


@pytest.mark.parametrize("name", JOBS)
def test_job_and_step_keys(name: str) -> None:
    job = JOBS[name]
    assert set(job) <= JOB_KEYS
    assert isinstance(job["runs-on"], str)
    assert set(job.get("container", {})) <= CONTAINER_KEYS
    assert job["steps"], "a job needs steps"
    for step in job["steps"]:
        assert set(step) <= STEP_KEYS, step
        assert ("uses" in step) != ("run" in step), f"uses or run, exactly one: {step}"
        if "uses" in step:
            assert ACTION.match(step["uses"]), step["uses"]
        else:
            assert isinstance(step["run"], str)


def test_expressions_are_closed() -> None:
    text = WORKFLOW.read_text()
    assert text.count("${{") == text.count("}}")


@pytest.mark.parametrize("name", JOBS)
def test_scripts_are_valid_bash(name: str) -> None:
    for script in scripts(JOBS[name]):
        result = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert result.returncode == 0, f"{result.stderr}\n{script}"


def test_a_job_on_the_runner_and_one_in_a_container() -> None:
    in_container = [job for job in JOBS.values() if "container" in job]
    assert len(JOBS) == 2 and len(in_container) == 1
    container = in_container[0]["container"]
    assert container["image"] == "debian:12"
    options = container["options"].split()
    assert " ".join(options).count("--device /dev/fuse") == 1
    assert " ".join(options).count("--cap-add SYS_ADMIN") == 1
    assert "apparmor=unconfined" in options  # AppArmor's docker-default denies mount(2)
    # The tests run as another user than the daemon (below): process_vm_writev needs it.
    assert " ".join(options).count("--cap-add SYS_PTRACE") == 1


@pytest.mark.parametrize("name", JOBS)
def test_checkout_install_and_test_under_tracefs_fuse(name: str) -> None:
    job = JOBS[name]
    assert any(step.get("uses") == "actions/checkout@v4" for step in job["steps"])
    installs = [s for s in scripts(job) if "pip" in s and "install" in s]
    assert len(installs) == 1
    assert '"$TRACEFS_FUSE"' in installs[0] and "TRACEFS_FUSE" in WORKFLOW_DOC["env"]
    words = tracefs_fuse_run(job)
    assert words[words.index("run") + 1:].count("--") == 1
    assert words[-2:] == ["make", "test"]  # the user's command, after --


@pytest.mark.parametrize("name", JOBS)
def test_only_tracefs_fuse_is_installed(name: str) -> None:
    text = "\n".join(scripts(JOBS[name]))
    assert "make setup" not in text  # it installs the test and bench extras
    assert not re.search(r"\[(test|bench)", text)
    for tool in ("pytest", "pyinstrument", "py-spy", "trace-cmd"):
        assert tool not in text


@pytest.mark.parametrize("name", JOBS)
def test_the_tests_do_not_run_as_root(name: str) -> None:
    job = JOBS[name]
    words = tracefs_fuse_run(job)
    command = words[words.index("--") + 1:]
    if "container" in job:
        # The container's root runs the daemon; the tests run as tester.
        assert command[:2] == ["setpriv", "--reuid=tester"]
        assert "--uid" in words[:words.index("--")]
    else:
        assert "sudo" not in words
