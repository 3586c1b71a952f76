# A plotting method whose caller saves and closes the figure right after each call; the
# axes' own `plot` calls, never followed by a close, are another function.
import matplotlib.pyplot as plt
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def forward(self, x):
        return self.layer(x)

    def plot(self, title):
        fig, ax = plt.subplots()
        ax.plot(self.layer.weight.detach().numpy().ravel())
        ax.plot(self.layer.bias.detach().numpy())
        ax.set_title(title)

    def fit(self, loader, opt, folder):
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(self(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            self.plot(title=f"step {step}")
            plt.savefig(f"{folder}/{step}.png")
            plt.close()


def main(loader, folder):
    net = Net()
    net.fit(loader, torch.optim.SGD(net.parameters(), lr=0.1), folder)
    net.plot(title="final")
    plt.savefig(f"{folder}/final.png")
    plt.close()
