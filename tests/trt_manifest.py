"""The committed TensorRT API manifest (``tests/data/tensorrt_api.json``) and the versions it holds: read
without importing the stand-in (``tests/fake_tensorrt.py`` imports torch), so that the conftest can
parametrize its fixture at collection for free."""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = json.loads((Path(__file__).resolve().parent / "data" / "tensorrt_api.json").read_text())
VERSIONS = tuple(sorted(MANIFEST["versions"]))  # ("10", "11")
