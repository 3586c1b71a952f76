"""Object-centric video prediction training (in the style of OCVP): every few hundred iterations
the trainer draws the predicted frames and the slot masks through the visualization helpers and
writes them to TensorBoard. The helpers open a figure each time and never close it; over a long
run the training script is killed.

Source: AIS-Bonn/OCVP-object-centric-video-prediction pull request #3 (first #2), "Fixed memory
leak related to matplotlib": "created figures were not closed properly after use. Solution:
`plt.close(fig)`" (and the Agg backend). Fix: close each figure after it is written.
"""

import torch
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter

from utils.visualization import visualize_decomp, visualize_sequence


class Trainer:
    def __init__(self, model, train_loader, exp_path, lr=2e-4, image_freq=500):
        self.model = model
        self.train_loader = train_loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.writer = SummaryWriter(exp_path)
        self.image_freq = image_freq
        self.iter = 0

    def train_epoch(self, epoch):
        self.model.train()
        for videos in self.train_loader:
            preds, masks = self.model(videos[:, :5])
            loss = F.mse_loss(preds, videos[:, 5:])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.iter % self.image_freq == 0:
                fig, _ = visualize_sequence(preds[0].detach().cpu(), videos[0, 5:].cpu())
                self.writer.add_image("preds", fig_to_array(fig), self.iter, dataformats="HWC")
                visualize_decomp(masks[0].detach().cpu(), savepath=f"masks_{self.iter}.png")
            self.iter += 1


def fig_to_array(fig):
    fig.canvas.draw()
    return torch.frombuffer(bytearray(fig.canvas.buffer_rgba()), dtype=torch.uint8).view(
        fig.canvas.get_width_height()[::-1] + (4,))[..., :3].numpy()
