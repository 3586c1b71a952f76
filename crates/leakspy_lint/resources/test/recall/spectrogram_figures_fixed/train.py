import torch
import torch.nn as nn
import wandb

from audio.artifacts import ArtifactLogger


class Trainer:
    def __init__(self, model, loader, optimizer, artifacts: ArtifactLogger, epochs=50):
        self.model = model
        self.loader = loader
        self.optimizer = optimizer
        self.artifacts = artifacts
        self.epochs = epochs
        self.criterion = nn.CrossEntropyLoss()

    def train(self):
        for epoch in range(self.epochs):
            self.train_epoch(epoch)

    def train_epoch(self, epoch):
        self.model.train()
        for it, (spec, label) in enumerate(self.loader):
            if it == 0:
                self.artifacts.upload(spec, label, flag="train")
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(spec), label)
            loss.backward()
            self.optimizer.step()


def main():
    wandb.init(project="whales")
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 2))
    data = torch.utils.data.TensorDataset(torch.randn(512, 1, 64, 32), torch.randint(0, 2, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    Trainer(model, loader, optimizer, ArtifactLogger(wandb)).train()


if __name__ == "__main__":
    main()
