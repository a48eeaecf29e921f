"""The wheel carries the JavaScript verifier the service serves at `/verify.js`: package data
cannot reach outside the package, so the build copies `src/verify-js/verify.mjs` to
`capability_anchor/api/verify.mjs` (api/scripts.py looks there after the checkout's copy)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

VERIFIER = Path(__file__).parent / "src" / "verify-js" / "verify.mjs"


class BuildWithVerifier(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "capability_anchor" / "api" / "verify.mjs"
            shutil.copyfile(VERIFIER, target)


setup(cmdclass={"build_py": BuildWithVerifier})
