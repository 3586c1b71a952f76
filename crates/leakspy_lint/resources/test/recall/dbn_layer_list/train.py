import torch
import torch.nn as nn

from models.vgg import VGG


def main():
    model = VGG()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(10):
        model.train()
        for _ in range(390):
            x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
