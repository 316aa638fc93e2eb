"""Shared test helpers: real servers, real models, events collected from real turns."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTY = [sys.executable, os.path.join(ROOT, "tests", "servers", "faulty.py")]
WEATHER = [sys.executable, "-m", "decodeloop.servers.weather"]


class Recorder(list):
    """An event sink that keeps every event; `of(kind)` filters."""

    def __call__(self, event) -> None:
        self.append(event)

    def of(self, kind: str) -> list:
        return [e for e in self if e.kind == kind]


@pytest.fixture
def events() -> Recorder:
    return Recorder()
