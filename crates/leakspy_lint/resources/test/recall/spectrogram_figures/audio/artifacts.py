"""Uploads the first batch of every epoch as spectrogram images to an experiment tracker. One
figure per spectrogram is made with a list comprehension of `plt.subplots`, and the "clear
figures" line at the end opens one more: none is ever closed, so pyplot keeps every epoch's
figures and host memory grew each epoch.

Source: deep-voice/soundbay pull request #50 ("memory leak in upload_artifacts"): the logger is
built by the training script and handed to the trainer, which calls it from its epoch loops.
Fix: make and close each figure in a loop (`fig, ax = plt.subplots(); ...; plt.close(fig)`).
"""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np


class ArtifactLogger:
    def __init__(self, tracker, limit=16):
        self.tracker = tracker
        self.limit = limit

    def upload(self, specs, labels, flag="train"):
        matplotlib.use("Agg")
        specs = specs[: self.limit].detach().cpu().numpy()
        labels = labels[: self.limit].cpu().numpy()
        figures = [plt.subplots(figsize=(4, 3)) for _ in range(specs.shape[0])]  # expect: LS012
        for (fig, ax), spec in zip(figures, specs):
            ax.imshow(np.log1p(np.abs(spec[0])), origin="lower", aspect="auto")
        images = [self.tracker.Image(fig, caption=f"{flag} {lab}") for (fig, _), lab in zip(figures, labels)]
        self.tracker.log({f"{flag} spectrograms": images}, commit=False)
        plt.figure().clear()  # expect: LS012
