"""Build of the optional compiled ON-LSTM step (everything else is in pyproject.toml).

`optional=True`: without a working C compiler the install still succeeds, with a warning, and the encoders use
their pure-PyTorch loop (onlstm_tasks/encoders/onlstm/compiled.py decides at run time).
"""

import sys

from setuptools import Extension, setup

FLAGS = [] if sys.platform == "win32" else ["-O3", "-fno-trapping-math", "-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension(
            "onlstm_tasks.encoders.onlstm._onlstm_step",
            sources=["onlstm_tasks/encoders/onlstm/_onlstm_step.c"],
            extra_compile_args=FLAGS,
            optional=True,
        )
    ]
)
