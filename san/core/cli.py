"""What the command-line tools (``python -m san...``) share: their result printed alone. The libraries they load
speak on their own (transformers' load reports and "Loading weights" bars, huggingface_hub's download bars, the
libraries' warnings); a tool silences them unless ``-v`` asks for them
(:func:`add_verbose`, :func:`quiet_libraries`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

#: the libraries whose reports, bars and warnings a tool keeps out of its output without ``-v``
LIBRARIES = ("transformers", "huggingface_hub", "torch", "accelerate", "safetensors")


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """The ``-v``/``--verbose`` flag of every tool: show the libraries' load reports, warnings and progress bars."""
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the libraries' load reports, warnings and progress bars"
    )


def quiet_libraries(verbose: bool = False) -> None:
    """Unless ``verbose``: the libraries of :data:`LIBRARIES` log errors only, show no progress bars and raise no
    warnings, whether already imported or imported later (their environment switches are set as well). Errors and
    exceptions still reach the user."""
    if verbose:
        return
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module=rf"{name}(\.|$)")
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_error()
        transformers_logging.disable_progress_bar()
