import torch.nn as nn

from norm import DBN

CFG = [64, 64, "M", 128, 128, "M", 256, 256, "M"]


class VGG(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        layers = []
        in_channels = 3
        for v in CFG:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, v, kernel_size=3, padding=1), DBN(v), nn.ReLU(inplace=True)]
                in_channels = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(256 * 4 * 4, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.flatten(1))
