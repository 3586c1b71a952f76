"""The model wrapper: one training step returns the loss and the metrics to log."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def photometric_loss(pred, target):
    return (pred - target).abs().mean()


class ModelWrapper(nn.Module):
    def __init__(self, depth_net, pose_net, dataset, lr=2e-4):
        super().__init__()
        self.depth_net = depth_net
        self.pose_net = pose_net
        self.dataset = dataset
        self.lr = lr

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.dataset, batch_size=4, shuffle=True)

    def training_step(self, batch, batch_idx):
        inv_depth = self.depth_net(batch["rgb"])
        pose = self.pose_net(batch["rgb"], batch["rgb_context"])
        warped = F.grid_sample(batch["rgb_context"], pose.view(-1, 1, 1, 2).expand(-1, 64, 64, 2),
                               align_corners=False)
        loss = photometric_loss(warped * inv_depth, batch["rgb"])
        return {"loss": loss, "metrics": {"inv_depth_mean": inv_depth.mean().item()}}

    def training_epoch_end(self, outputs):
        avg = sum(o["metrics"]["inv_depth_mean"] for o in outputs) / max(len(outputs), 1)
        print(f"inverse depth (mean): {avg:.4f}")
