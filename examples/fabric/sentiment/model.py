"""The function the workers run. It exists only in this directory: a worker started
anywhere gets it with the run (lakeshore.yaml's code section), by digest."""

from __future__ import annotations

import os

import lakeshore
from lakeshore import lifecycle

MODEL: dict[str, dict[str, int]] = {}


@lifecycle.on_host_setup
def load_model() -> None:
    """Once per worker process, before its first body: stands for loading weights."""
    MODEL["words"] = {"good": 1, "great": 2, "love": 2, "bad": -1, "awful": -2, "hate": -2}


@lakeshore.udf(queue="fabric-sentiment", mode="cpu")
def score(text: str) -> dict[str, object]:
    """The sentiment of text: the sum of its words' weights against the mode's threshold."""
    words = MODEL["words"]
    total = sum(words.get(w.strip(".,!?").lower(), 0) for w in text.split())
    label = "positive" if total > int(os.environ["SENTIMENT_THRESHOLD"]) else "negative"
    return {"text": text, "score": total, "label": label, "phase": lifecycle.phase()}
