"""A detector trained with focal loss logs, every step, the cumulative distribution of the
per-anchor losses as an image for TensorBoard. The helper draws the CDF with pyplot, renders it
to an array and returns the array; the figure itself stays registered with pyplot, one per step.

Source: tensorflow/models issue #3603, "Plots should be explicitly closed in
add_cdf_image_summary" ("More than 20 figures have been opened ... consume too much memory";
"Inserting `plt.close(fig)` before returning the image resolves the issue").
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter


def cdf_image(values, name):
    sorted_values = np.sort(values)
    cumulative = np.cumsum(sorted_values) / max(sorted_values.sum(), 1e-12)
    fraction = np.arange(len(sorted_values)) / len(sorted_values)
    fig = plt.figure(frameon=False)  # expect: LS012
    ax = fig.add_subplot(111)
    ax.plot(fraction, cumulative)
    ax.set_ylabel("cumulative normalized values")
    ax.set_xlabel("fraction of examples")
    ax.set_title(name)
    fig.canvas.draw()
    width, height = fig.get_size_inches() * fig.get_dpi()
    image = np.frombuffer(fig.canvas.buffer_rgba(), dtype=np.uint8).reshape(int(height), int(width), 4)
    return image[..., :3]


def sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(logits)
    ce = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    return alpha * (1 - p_t) ** gamma * ce


def train(detector, loader, steps=200000, log_dir="runs/retinanet"):
    writer = SummaryWriter(log_dir)
    optimizer = torch.optim.SGD(detector.parameters(), lr=0.01, momentum=0.9)
    for step, (images, anchor_targets) in zip(range(steps), loader):
        cls_logits = detector(images)
        per_anchor = sigmoid_focal_loss(cls_logits, anchor_targets)
        loss = per_anchor.sum() / max(anchor_targets.sum().item(), 1.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_image("focal_loss_cdf", cdf_image(per_anchor.detach().flatten().numpy(), "focal loss"),
                         step, dataformats="HWC")
