"""``prove``'s sessions on devices of their own: the scheduler (stand-in device lists, no
GPU), where the device list comes from, and sessions that see only their devices."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lint_gpu_tests.prove.devices import DEVICES_ENV, find_devices, visibility_variable
from lint_gpu_tests.prove.schedule import Job, run_on_devices
from lint_gpu_tests.prove.shard import parse_shard, shard_of


class Devices:
    """A run function that holds its devices a while, and checks no device is held by more
    sessions than it may take."""

    def __init__(self, per_device: int = 1, seconds: float = 0.05) -> None:
        self.per_device, self.seconds = per_device, seconds
        self.held: dict[str, int] = {}
        self.lock = threading.Lock()
        self.log: list[tuple[str, tuple[str, ...]]] = []
        self.most = 0

    def __call__(self, job: Job, devices: tuple[str, ...]) -> tuple[str, ...]:
        with self.lock:
            for device in devices:
                self.held[device] = self.held.get(device, 0) + 1
                assert self.held[device] <= self.per_device, (job, devices, self.held)
            self.most = max(self.most, sum(1 for n in self.held.values() if n))
            self.log.append((job.module, devices))
        time.sleep(self.seconds)
        with self.lock:
            for device in devices:
                self.held[device] -= 1
        return devices


def jobs(*needs: int) -> list[Job]:
    return [Job(f"m{i}.py", "before", Path("."), devices=n, cost=float(10 - i))
            for i, n in enumerate(needs)]


def test_each_session_gets_a_device_of_its_own() -> None:
    run = Devices()
    done = run_on_devices(jobs(1, 1, 1, 1), run, devices=["0", "1"])
    assert sorted(done.values()) == [("0",), ("0",), ("1",), ("1",)]
    assert run.most == 2


def test_a_session_needing_two_devices_waits_for_two() -> None:
    run = Devices()
    done = run_on_devices(jobs(1, 2, 1), run, devices=["0", "1"])
    # the session needing two goes first, alone; the two others then side by side
    assert run.log[0] == ("m1.py", ("0", "1"))
    assert {j.module: d for j, d in done.items()}["m1.py"] == ("0", "1")
    assert sorted(d for j, d in done.items() if j.module != "m1.py") == [("0",), ("1",)]


def test_a_session_needing_more_devices_than_there_are_takes_them_all() -> None:
    done = run_on_devices(jobs(4), Devices(), devices=["3", "5"])
    assert list(done.values()) == [("3", "5")]


def test_sessions_share_a_device_only_when_told() -> None:
    run = Devices(per_device=2)
    done = run_on_devices(jobs(1, 1), run, devices=["0"], per_device=2)
    assert sorted(done.values()) == [("0",), ("0",)]
    with pytest.raises(ValueError):
        run_on_devices(jobs(1), run, devices=[])


def test_where_the_devices_come_from(monkeypatch: pytest.MonkeyPatch) -> None:
    variable = visibility_variable()
    assert find_devices("2,3", {}) == ("2", "3")
    assert find_devices(None, {DEVICES_ENV: "4", variable: "0,1"}) == ("4",)
    assert find_devices(None, {variable: "0, 1"}) == ("0", "1")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # not installed
    assert find_devices(None, {variable: ""}) is None
    assert find_devices(None, {}) is None


def test_shards_partition_the_modules_balanced_by_recorded_seconds() -> None:
    modules = ["a.py", "b.py", "c.py", "d.py"]
    cost = {"a.py": 10.0, "b.py": 9.0, "c.py": 2.0, "d.py": 1.0}
    assert [shard_of(modules, k, 2, cost) for k in (1, 2)] == [["a.py", "d.py"],
                                                               ["b.py", "c.py"]]
    # without recordings each counts the same; with some, the others take their mean
    assert [shard_of(modules, k, 3) for k in (1, 2, 3)] == [["a.py", "d.py"], ["b.py"],
                                                            ["c.py"]]
    assert [shard_of(modules, k, 2, {"a.py": 3.0, "b.py": 1.0}) for k in (1, 2)] == [
        ["a.py", "b.py"], ["c.py", "d.py"]]
    many = [f"m{i}.py" for i in range(11)]
    parts = [shard_of(many, k, 4) for k in range(1, 5)]
    assert sorted(m for part in parts for m in part) == sorted(many)
    assert [len(p) for p in parts] == [3, 3, 3, 2]
    assert parse_shard("2/3") == (2, 3)
    for wrong in ("0/2", "3/2", "a/b", "2"):
        with pytest.raises(ValueError, match="expected K/N"):
            parse_shard(wrong)
