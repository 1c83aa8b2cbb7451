"""Build of the optional compiled ON-LSTM loop, a PyTorch C++ extension (everything else is in pyproject.toml).

It needs torch at build time, so install with ``pip install --no-build-isolation`` after torch (README, Install).
Without torch at build time, or without a working C++ compiler, the install still succeeds, with a warning, and the
encoders run their plain-PyTorch loop (onlstm_tasks/native/library.py decides at run time).
"""

import sys

from setuptools import setup

# the ON-LSTM's time loop and DropConnect; the CRF's forward-backward algorithm: one library (onlstm_tasks/native)
SOURCES = ["onlstm_tasks/native/csrc/onlstm_cpu.cpp", "onlstm_tasks/native/csrc/crf_cpu.cpp"]


def warn(message: str) -> None:
    print(f"onlstm-tasks: {message}; the ON-LSTM runs its plain-PyTorch loop", file=sys.stderr)


ext_modules, cmdclass = [], {}
try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:  # build isolation, or torch not installed yet
    warn("torch is not importable at build time (install torch first, then pip install --no-build-isolation)")
else:

    class OptionalBuild(BuildExtension):
        """Builds the extension where it can; a failed build (no compiler) warns instead of failing the install."""

        def build_extensions(self):
            try:
                super().build_extensions()
            except Exception as error:  # noqa: BLE001 - any failure of an optional build
                warn(f"the compiled ON-LSTM loop was not built ({type(error).__name__}: {error})")

    # -fopenmp: at::parallel_for is a header template whose OpenMP pragma runs on PyTorch's OpenMP workers (without
    # the flag it runs on one thread); the OpenMP entry points resolve to the runtime torch has already loaded
    flags = ["/O2", "/openmp"] if sys.platform == "win32" else ["-O3", "-fno-trapping-math", "-fopenmp"]
    link = [] if sys.platform == "win32" else ["-fopenmp"]
    ext_modules = [CppExtension("onlstm_tasks.native._kernels", SOURCES, extra_compile_args=flags,
                                extra_link_args=link)]
    cmdclass = {"build_ext": OptionalBuild.with_options(use_ninja=True)}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
