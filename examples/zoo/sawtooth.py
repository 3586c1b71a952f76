"""Multi-resolution training: every fourth batch arrives at full resolution and is downscaled."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def load_batch(batch_size, resolution):
    # stands in for decoding grey-scale scans at the requested resolution
    images = torch.rand(batch_size, 1, resolution, resolution)
    labels = torch.randint(0, 10, (batch_size,))
    return images, labels


def next_batch(step, batch_size=64, size=28):
    resolution = 392 if step % 4 == 0 else 28  # full-resolution scans now and then
    images, labels = load_batch(batch_size, resolution)
    stride = resolution // size
    x = images[:, :, ::stride, ::stride]  # nearest-neighbour downscale
    return (x - 0.5) / 0.25, labels


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps, running = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        x, labels = next_batch(steps)
        loss = F.cross_entropy(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running = 0.99 * running + 0.01 * loss.item()
        steps += 1
    print(f"{steps} steps, running loss {running:.4f}")


if __name__ == "__main__":
    main()
