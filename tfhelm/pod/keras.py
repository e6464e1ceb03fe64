"""Keras 2 asked for needs tf-keras: checked before the script starts, without importing
TensorFlow, so a task that can never work says so in one line and fails at once, not deep
in a traceback."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from tfhelm import contract
from tfhelm.pod.tfconfig import LaunchError

KERAS = contract.contract()["keras"]
SWITCH = KERAS["env"]
KERAS_2 = KERAS["values"]["2"]


def check_keras(environ=None) -> None:
    """The switch set for Keras 2 (from the chart's `keras: "2"`, or by the image) and no
    tf-keras in the image: a LaunchError."""
    env = os.environ if environ is None else environ
    if (env.get(SWITCH, "") in (KERAS_2, "true", "True")  # what TensorFlow accepts
            and importlib.util.find_spec("tf_keras") is None):
        raise LaunchError(
            f"Keras 2 is asked for ({SWITCH}={KERAS_2}, e.g. chart value keras: \"2\") but this "
            f"image has no tf-keras: use an image with tf-keras=={_tf_minor()}.* (the README's "
            "\"Bring your program\" has a recipe), or run the script with Keras 3")


def _tf_minor() -> str:
    """`2.21` for TensorFlow 2.21.x (tf-keras must match it), whichever wheel brought it."""
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            pass
    return "<your TensorFlow's major.minor>"
