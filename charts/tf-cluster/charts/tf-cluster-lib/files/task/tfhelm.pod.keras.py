# tfhelm/pod/keras.py without its prose (make chart-files)
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
    env = os.environ if environ is None else environ
    if (env.get(SWITCH, "") in (KERAS_2, "true", "True")
            and importlib.util.find_spec("tf_keras") is None):
        raise LaunchError(
            f"Keras 2 is asked for ({SWITCH}={KERAS_2}, e.g. chart value keras: \"2\") but this "
            f"image has no tf-keras: use an image with tf-keras=={_tf_minor()}.* (the README's "
            "\"Bring your program\" has a recipe), or run the script with Keras 3")
def _tf_minor() -> str:
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            pass
    return "<your TensorFlow's major.minor>"
