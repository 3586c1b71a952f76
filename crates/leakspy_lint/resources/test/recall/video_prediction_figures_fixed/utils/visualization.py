"""Figures for the training logs."""

import matplotlib.pyplot as plt


def visualize_sequence(preds, targets, n_frames=5):
    fig, ax = plt.subplots(2, n_frames, figsize=(3 * n_frames, 6))
    for t in range(n_frames):
        ax[0, t].imshow(preds[t].permute(1, 2, 0).clamp(0, 1))
        ax[1, t].imshow(targets[t].permute(1, 2, 0).clamp(0, 1))
        ax[0, t].axis("off")
        ax[1, t].axis("off")
    return fig, ax


def visualize_decomp(masks, savepath=None):
    num_slots = masks.shape[0]
    fig, ax = plt.subplots(1, num_slots, figsize=(3 * num_slots, 3))
    for s in range(num_slots):
        ax[s].imshow(masks[s, 0], cmap="gray", vmin=0, vmax=1)
        ax[s].set_title(f"slot {s}")
        ax[s].axis("off")
    if savepath is not None:
        fig.savefig(savepath)
    plt.close(fig)
